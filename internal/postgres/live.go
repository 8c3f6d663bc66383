package postgres

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
)

// Products returns the limit most recently changed products, newest first.
func (s *Store) Products(ctx context.Context, limit int) ([]inventory.Product, error) {
	rows, err := s.reads.Query(ctx, `
		SELECT product_id, name, quantity, initial, round, version
		FROM stock ORDER BY updated_at DESC, product_id LIMIT $1`, limit)
	if err != nil {
		return nil, dbErr("list products", err)
	}
	defer rows.Close()
	var out []inventory.Product
	for rows.Next() {
		var p inventory.Product
		if err := rows.Scan(&p.ID, &p.Name, &p.Quantity, &p.Initial, &p.Round, &p.Version); err != nil {
			return nil, dbErr("list products", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list products", err)
	}
	return out, nil
}

// MaxSalesSince bounds what one SalesSince counts: the newest sales only,
// however old the cursor (a ledger is never pruned).
const MaxSalesSince = 10_000

// newestSales is the count of the newest MaxSalesSince sales, by strategy,
// as of sale id last, made at most once per Limits.NewestSales: what every
// cursor further behind than that is answered with.
type newestSales struct {
	mu     sync.Mutex // held while counting: one count at a time
	at     time.Time
	last   int64
	counts map[string]int64
}

// SalesSince counts, by strategy, the ledger rows after sale id after (by
// the ledger's primary key, so it reads only the new rows), and returns the
// newest sale id they were counted up to; with after < 0 it counts nothing
// and only returns the newest id, a cursor for the next call.
//
// A cursor more than MaxSalesSince sales behind (a new live page's
// ?since=0, on a long ledger) gets the newest MaxSalesSince sales, counted
// at most once per Limits.NewestSales for every such reader, and the id
// they were counted up to: however many readers arrive, the ledger is
// counted a few times a second. The next call, from that id, is counted
// exactly.
func (s *Store) SalesSince(ctx context.Context, after int64) (byStrategy map[string]int64, last int64, err error) {
	if err := s.reads.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM sales`).Scan(&last); err != nil {
		return nil, 0, dbErr("newest sale", err)
	}
	if after < 0 || after >= last {
		return map[string]int64{}, last, nil
	}
	if after < last-MaxSalesSince {
		return s.newestSales(ctx, last)
	}
	byStrategy, err = s.countSales(ctx, after, last)
	return byStrategy, last, err
}

// newestSales returns the count of the newest MaxSalesSince sales up to a
// sale id at most Limits.NewestSales old, counting them again (up to last)
// when it is older.
func (s *Store) newestSales(ctx context.Context, last int64) (map[string]int64, int64, error) {
	n := &s.newest
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.counts == nil || time.Since(n.at) >= s.limits.NewestSales {
		counts, err := s.countSales(ctx, last-MaxSalesSince, last)
		if err != nil {
			return nil, 0, err
		}
		n.at, n.last, n.counts = time.Now(), last, counts
	}
	return maps.Clone(n.counts), n.last, nil
}

// countSales counts, by strategy, the ledger rows with after < id <= last.
func (s *Store) countSales(ctx context.Context, after, last int64) (map[string]int64, error) {
	rows, err := s.reads.Query(ctx, `
		SELECT strategy, count(*) FROM sales WHERE id > $1 AND id <= $2 GROUP BY strategy`, after, last)
	if err != nil {
		return nil, dbErr("count sales", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, dbErr("count sales", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("count sales", err)
	}
	return out, nil
}

// RoundOrders are one product's orders in a round by the state each is in
// now (every order is in exactly one), and the units returned to the
// round's stock by its cancelled, expired and refunded orders.
type RoundOrders struct {
	Held, Paid, Shipped, Cancelled, Expired, Refunded int64
	// Returned is round_totals.returned: units given back to this round
	// (an order of an earlier round gives nothing to this one).
	Returned int64
}

// liveOrders is the last OrderCounts answer, shared by every reader: at
// most one count per Limits.NewestSales, whatever the number of live pages.
type liveOrders struct {
	mu     sync.Mutex // held while counting: one count at a time
	at     time.Time
	counts map[productRound]RoundOrders
}

type productRound struct {
	id    string
	round int
}

// OrderCounts returns, for each of products (by id), the orders of its
// current round (Product.Round) by state and the units returned to that
// round: what the live page shows beside the stock. The answer may be up
// to Limits.NewestSales old: one count serves every reader for that long,
// and a reader that finds it too old, or missing one of its products or
// rounds (a restock started a round), counts again for everyone while the
// others wait for it. So the live page's cost in Postgres does not grow
// with the number of pages open, only with the orders of the products it
// shows (orders_product_round_state, migrations/00013).
func (s *Store) OrderCounts(ctx context.Context, products []inventory.Product) (map[string]RoundOrders, error) {
	c := &s.liveOrders
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := c.counts != nil && time.Since(c.at) < s.limits.NewestSales
	for _, p := range products {
		if _, ok := c.counts[productRound{p.ID, p.Round}]; !ok {
			fresh = false
		}
	}
	if !fresh {
		counts, err := s.countOrders(ctx, products)
		if err != nil {
			return nil, err
		}
		c.at, c.counts = time.Now(), counts
	}
	out := make(map[string]RoundOrders, len(products))
	for _, p := range products {
		out[p.ID] = c.counts[productRound{p.ID, p.Round}]
	}
	return out, nil
}

// countOrders is OrderCounts' one query: for each product, its round's
// totals row and its round's orders counted by state through the index on
// (product_id, round, state).
func (s *Store) countOrders(ctx context.Context, products []inventory.Product) (map[productRound]RoundOrders, error) {
	ids, rounds := make([]string, len(products)), make([]int32, len(products))
	for i, p := range products {
		ids[i], rounds[i] = p.ID, int32(p.Round)
	}
	rows, err := s.reads.Query(ctx, `
		SELECT p.id, p.round, c.held, c.paid, c.shipped, c.cancelled, c.expired, c.refunded, coalesce(t.returned, 0)
		FROM unnest($1::text[], $2::int[]) AS p(id, round)
		LEFT JOIN round_totals t ON t.product_id = p.id AND t.round = p.round
		CROSS JOIN LATERAL (
			SELECT count(*) FILTER (WHERE state = 'held') AS held,
			       count(*) FILTER (WHERE state = 'paid') AS paid,
			       count(*) FILTER (WHERE state = 'shipped') AS shipped,
			       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
			       count(*) FILTER (WHERE state = 'expired') AS expired,
			       count(*) FILTER (WHERE state = 'refunded') AS refunded
			FROM orders o WHERE o.product_id = p.id AND o.round = p.round) c`, ids, rounds)
	if err != nil {
		return nil, dbErr("count orders", err)
	}
	out := make(map[productRound]RoundOrders, len(products))
	var k productRound
	var o RoundOrders
	_, err = pgx.ForEachRow(rows, []any{&k.id, &k.round, &o.Held, &o.Paid, &o.Shipped, &o.Cancelled, &o.Expired, &o.Refunded, &o.Returned},
		func() error {
			out[k] = o
			return nil
		})
	if err != nil {
		return nil, dbErr("count orders", err)
	}
	return out, nil
}
