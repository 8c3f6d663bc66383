package postgres

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
)

// RoundStory is one round of a product as the live page tells it: what it
// started with, what its ledger kept, which strategies sold in it, the
// product's stock when it is the current round, and the sale circuit the
// invariant watchdog opened on it, if any.
type RoundStory struct {
	inventory.Round
	// StartedAt is when the restock that began it committed.
	StartedAt time.Time
	// Stock is the product's stock now when Current; for an ended round
	// it is 0 (a restock overwrote it, and nothing keeps it).
	Stock int64
	// Strategies are the units of the round's ledger rows by the strategy
	// that sold them (returns not taken off).
	Strategies map[string]int64
	// Circuit is the circuit the watchdog opened on this round, or nil.
	// Table circuits keeps one per product, its last opening: a circuit of
	// an earlier round is gone once a later round of the product tripped.
	Circuit *RoundCircuit
}

// RoundCircuit is a sale circuit opened on a round, with the evidence the
// watchdog saw.
type RoundCircuit struct {
	// Kind is what broke (watchdog.NegativeStock, watchdog.LedgerMismatch).
	Kind string
	// Open is the circuits row's open flag: it refuses the product's sales
	// only while its round is the current one.
	Open bool
	// Quantity, Initial and Sold are the round's stock, initial and ledger
	// units as the watchdog saw them.
	Quantity, Initial, Sold int64
	OpenedAt                time.Time
	OpenedBy                string
	// ClosedAt is when an admin closed it; zero while it is open.
	ClosedAt time.Time
}

// liveRounds is the last Rounds answer, shared by every reader like
// liveOrders, and each round's settled units by strategy: those of its
// sales up to a sale id that every read since has seen, so that a read sums
// only the sales after it (see countStrategies).
type liveRounds struct {
	mu         sync.Mutex // held while reading: one read at a time
	at         time.Time
	limit      int
	stories    map[string][]RoundStory
	strategies map[productRound]strategyUnits
	// settle is the newest sale id of the last read: a sale with an id up
	// to it took it before that read, so by the next one it has committed
	// or rolled back, but for a rare slow one, which countStrategies
	// catches by the count.
	settle int64
}

// strategyUnits are a round's units by strategy over its sales with ids
// up to upTo, sales of them.
type strategyUnits struct {
	upTo  int64
	sales int64
	units map[string]int64
}

// Rounds returns, for each of products (by id), its newest perProduct
// rounds, newest first: the story of the product on this database, so an
// oversell stays visible after a restock started the next round. Like
// OrderCounts, the answer may be up to Limits.NewestSales old, one read
// serving every reader meanwhile, and it is read again at once when one of
// products is missing from it or has started a round it does not show.
//
// The read is one snapshot (a repeatable-read transaction): the rounds and
// their totals (rounds, round_totals, by their primary keys), the circuits,
// and each round's ledger units by strategy, of which it sums only the
// sales made since the last read (see countStrategies): an ended round's
// are summed at its first reads and then kept in memory. So a read costs
// the new sales, not the length of the rounds, but for a replica's first
// read, which sums every round shown whole (BenchmarkRounds measures both).
func (s *Store) Rounds(ctx context.Context, products []inventory.Product, perProduct int) (map[string][]RoundStory, error) {
	c := &s.liveRounds
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := c.stories != nil && c.limit == perProduct && time.Since(c.at) < s.limits.NewestSales
	for _, p := range products {
		if st, ok := c.stories[p.ID]; !ok || len(st) == 0 || st[0].Round.Round != p.Round {
			fresh = false
		}
	}
	if !fresh {
		stories, err := s.readRounds(ctx, products, perProduct)
		if err != nil {
			return nil, err
		}
		c.at, c.limit, c.stories = time.Now(), perProduct, stories
	}
	out := make(map[string][]RoundStory, len(products))
	for _, p := range products {
		out[p.ID] = c.stories[p.ID]
	}
	return out, nil
}

// readRounds is Rounds' read, in one snapshot; the caller holds
// s.liveRounds.mu.
func (s *Store) readRounds(ctx context.Context, products []inventory.Product, perProduct int) (map[string][]RoundStory, error) {
	ids := make([]string, len(products))
	for i, p := range products {
		ids[i] = p.ID
	}
	tx, err := s.reads.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, dbErr("read rounds: begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, `
		SELECT r.product_id, r.round, r.initial, r.started_at, r.round = s.round, s.quantity,
		       coalesce(t.units - t.returned, 0), coalesce(t.sales, 0), coalesce(t.returned, 0),
		       c.kind, c.open, c.quantity, c.initial, c.sold, c.opened_at, c.opened_by, c.closed_at
		FROM unnest($1::text[]) AS p(id)
		JOIN stock s ON s.product_id = p.id
		CROSS JOIN LATERAL (
			SELECT product_id, round, initial, started_at FROM rounds
			WHERE product_id = p.id ORDER BY round DESC LIMIT $2) r
		LEFT JOIN round_totals t ON t.product_id = r.product_id AND t.round = r.round
		LEFT JOIN circuits c ON c.product_id = r.product_id AND c.round = r.round
		ORDER BY r.product_id, r.round DESC`, ids, perProduct)
	if err != nil {
		return nil, dbErr("read rounds", err)
	}
	var (
		out      = make(map[string][]RoundStory, len(products))
		r        RoundStory
		stock    int64
		kind     *string
		open     *bool
		cq, ci   *int64
		cs       *int64
		openedAt *time.Time
		openedBy *string
		closedAt *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&r.ProductID, &r.Round.Round, &r.Initial, &r.StartedAt, &r.Current, &stock,
		&r.Sold, &r.Sales, &r.Returned, &kind, &open, &cq, &ci, &cs, &openedAt, &openedBy, &closedAt},
		func() error {
			story := r
			story.Stock, story.Circuit = 0, nil
			if story.Current {
				story.Stock = stock
			}
			if kind != nil {
				story.Circuit = &RoundCircuit{Kind: *kind, Open: *open, Quantity: *cq, Initial: *ci, Sold: *cs,
					OpenedAt: *openedAt, OpenedBy: *openedBy}
				if closedAt != nil {
					story.Circuit.ClosedAt = *closedAt
				}
			}
			out[story.ProductID] = append(out[story.ProductID], story)
			return nil
		})
	if err != nil {
		return nil, dbErr("read rounds", err)
	}
	if err := s.countStrategies(ctx, tx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// countStrategies fills in each story's units by strategy, in tx's
// snapshot (the one its number of sales was read in). A round whose
// number of sales is the settled count's takes that (every ended round,
// after its first read); any other sums only its sales with ids above the
// settled ones': those up to the last read's newest id become settled,
// the newer ones count in this answer alone. So a read costs the sales
// made since the last one, not the round's. The settled counts are exact:
// when they and the new sales do not add up to the round's number of
// sales (a sale with an id below the settled ones' committed after a read
// settled them, in flight for a whole read), the round is summed whole.
func (s *Store) countStrategies(ctx context.Context, tx pgx.Tx, stories map[string][]RoundStory) error {
	c := &s.liveRounds
	if c.strategies == nil {
		c.strategies = map[productRound]strategyUnits{}
	}
	var newest int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM sales`).Scan(&newest); err != nil {
		return dbErr("read rounds: newest sale", err)
	}
	settle := min(c.settle, newest)
	var whole []*RoundStory
	sum := func(batch *pgx.Batch, st *RoundStory, have strategyUnits) {
		k := productRound{st.ProductID, st.Round.Round}
		batch.Queue(`
			SELECT strategy, coalesce(sum(quantity) FILTER (WHERE id <= $4), 0)::bigint, count(*) FILTER (WHERE id <= $4),
			       sum(quantity)::bigint, count(*)
			FROM sales WHERE product_id = $1 AND round = $2 AND id > $3 GROUP BY strategy`,
			st.ProductID, st.Round.Round, have.upTo, settle).Query(func(rows pgx.Rows) error {
			settled := strategyUnits{upTo: max(have.upTo, settle), sales: have.sales, units: maps.Clone(have.units)}
			if settled.units == nil {
				settled.units = map[string]int64{}
			}
			answer := maps.Clone(settled.units)
			total := have.sales
			var (
				name                   string
				settledUnits, allUnits int64
				settledSales, allSales int64
			)
			_, err := pgx.ForEachRow(rows, []any{&name, &settledUnits, &settledSales, &allUnits, &allSales}, func() error {
				if settledSales > 0 {
					settled.units[name] += settledUnits
					settled.sales += settledSales
				}
				answer[name] += allUnits
				total += allSales
				return nil
			})
			if err != nil {
				return fmt.Errorf("round %d of %q: %w", st.Round.Round, st.ProductID, err)
			}
			if total != st.Sales {
				whole = append(whole, st)
				return nil
			}
			st.Strategies = answer
			c.strategies[k] = settled
			return nil
		})
	}
	var batch pgx.Batch
	for id := range stories {
		for i := range stories[id] {
			st := &stories[id][i]
			have := c.strategies[productRound{st.ProductID, st.Round.Round}]
			if have.units != nil && have.sales == st.Sales {
				st.Strategies = maps.Clone(have.units)
				continue
			}
			if st.Sales == 0 {
				st.Strategies = map[string]int64{}
				continue
			}
			sum(&batch, st, have)
		}
	}
	if err := s.sendBatch(ctx, tx, &batch); err != nil {
		return err
	}
	if len(whole) > 0 {
		var again pgx.Batch
		for _, st := range whole {
			sum(&again, st, strategyUnits{})
		}
		whole = nil
		if err := s.sendBatch(ctx, tx, &again); err != nil {
			return err
		}
		if len(whole) > 0 { // summed whole in the same snapshot: cannot differ
			return fmt.Errorf("postgres: read rounds: round %d of %q: its sales by strategy do not add up to its %d sales",
				whole[0].Round.Round, whole[0].ProductID, whole[0].Sales)
		}
	}
	c.settle = newest
	return nil
}

// sendBatch sends batch in tx, if it holds anything.
func (s *Store) sendBatch(ctx context.Context, tx pgx.Tx, batch *pgx.Batch) error {
	if batch.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return dbErr("read rounds: sales by strategy", err)
	}
	return nil
}
