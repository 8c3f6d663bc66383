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
// liveOrders, and the units by strategy of every round counted so far,
// kept with the round's number of sales they were counted at: a round
// whose sales did not change (every ended round) is not counted again.
type liveRounds struct {
	mu         sync.Mutex // held while reading: one read at a time
	at         time.Time
	limit      int
	stories    map[string][]RoundStory
	strategies map[productRound]strategyUnits
}

// strategyUnits is a round's ledger units by strategy as of its sales-th
// sale.
type strategyUnits struct {
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
// and, for each round whose number of sales changed since it was last
// counted, its ledger rows summed by strategy (the index on
// (product_id, round)). An ended round is summed once; a current round as
// often as it sells, at most once per Limits.NewestSales: the same scan the
// watchdog makes of each product it finds touched.
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

// countStrategies fills in each story's units by strategy: from the last
// count when the round's number of sales is the same, else summed from
// the ledger in tx's snapshot (the one its number of sales was read in).
func (s *Store) countStrategies(ctx context.Context, tx pgx.Tx, stories map[string][]RoundStory) error {
	c := &s.liveRounds
	if c.strategies == nil {
		c.strategies = map[productRound]strategyUnits{}
	}
	var batch pgx.Batch
	for id := range stories {
		for i := range stories[id] {
			st := &stories[id][i]
			k := productRound{st.ProductID, st.Round.Round}
			if have, ok := c.strategies[k]; ok && have.sales == st.Sales {
				st.Strategies = maps.Clone(have.units)
				continue
			}
			st.Strategies = map[string]int64{}
			if st.Sales == 0 {
				c.strategies[k] = strategyUnits{units: map[string]int64{}}
				continue
			}
			batch.Queue(`SELECT strategy, sum(quantity)::bigint FROM sales WHERE product_id = $1 AND round = $2 GROUP BY strategy`,
				st.ProductID, st.Round.Round).Query(func(rows pgx.Rows) error {
				var name string
				var units int64
				_, err := pgx.ForEachRow(rows, []any{&name, &units}, func() error {
					st.Strategies[name] = units
					return nil
				})
				if err != nil {
					return fmt.Errorf("round %d of %q: %w", st.Round.Round, st.ProductID, err)
				}
				c.strategies[k] = strategyUnits{sales: st.Sales, units: maps.Clone(st.Strategies)}
				return nil
			})
		}
	}
	if batch.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		return dbErr("read rounds: sales by strategy", err)
	}
	return nil
}
