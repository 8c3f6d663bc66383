package postgres

import (
	"context"
	"maps"
	"sync"
	"time"

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
