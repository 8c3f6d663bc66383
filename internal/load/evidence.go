package load

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"inventory/internal/history"
	"inventory/internal/verdict"
)

// ledger reads, in one snapshot, product id's state and, when rows, every
// row of its ledger from round first on: the ledger then agrees with the
// stock read, even if a sale that lingered past its answer commits as they
// are read.
func (p *pgTruth) snapshot(ctx context.Context, id string, first int64, rows bool) (product, []verdict.LedgerRow, error) {
	var out product
	var ledger []verdict.LedgerRow
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if out, err = readProduct(ctx, tx, id); err != nil || !rows {
			return err
		}
		r, err := tx.Query(ctx, `
			SELECT id, coalesce(idempotency_key, ''), round, strategy, instance FROM sales
			WHERE product_id = $1 AND round >= $2 ORDER BY id`, id, first)
		if err != nil {
			return fmt.Errorf("read the ledger of %s: %w", id, err)
		}
		ledger, err = pgx.CollectRows(r, func(row pgx.CollectableRow) (verdict.LedgerRow, error) {
			var l verdict.LedgerRow
			err := row.Scan(&l.ID, &l.Key, &l.Round, &l.Strategy, &l.Instance)
			return l, err
		})
		if err != nil {
			return fmt.Errorf("read the ledger of %s: %w", id, err)
		}
		if ledger == nil {
			ledger = []verdict.LedgerRow{} // read, and empty
		}
		return nil
	})
	return out, ledger, err
}

// circuits reads the circuits the invariant watchdog opened on ids, each
// in a round from its first on (firsts, by id).
func (p *pgTruth) circuits(ctx context.Context, ids []string, firsts map[string]int64) ([]verdict.Circuit, error) {
	rows, err := p.pool.Query(ctx, `SELECT product_id, round, kind, quantity, initial, sold, open, opened_at, opened_by
		FROM circuits WHERE product_id = ANY($1) ORDER BY product_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("read the circuits: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (verdict.Circuit, error) {
		var c verdict.Circuit
		err := row.Scan(&c.Product, &c.Round, &c.Kind, &c.Quantity, &c.Initial, &c.Sold, &c.Open, &c.OpenedAt, &c.OpenedBy)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the circuits: %w", err)
	}
	var out []verdict.Circuit
	for _, c := range all {
		if c.Round >= firsts[c.Product] {
			out = append(out, c)
		}
	}
	return out, nil
}

// readProduct reads product id's stock row and its current round's ledger
// totals through q.
func readProduct(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, id string) (product, error) {
	out := product{ProductID: id}
	err := q.QueryRow(ctx, `
		SELECT s.name, s.quantity, s.initial, s.round, s.version,
		       coalesce(l.units, 0) - coalesce(r.units, 0), coalesce(l.n, 0)
		FROM stock s
		LEFT JOIN LATERAL (
			SELECT sum(quantity) AS units, count(*) AS n
			FROM sales WHERE product_id = $1 AND round = s.round
		) l ON true
		LEFT JOIN LATERAL (
			-- units of cancelled, expired, refunded orders back in the stock
			SELECT sum(quantity) AS units
			FROM returns WHERE product_id = $1 AND round = s.round AND restored
		) r ON true
		WHERE s.product_id = $1`, id).
		Scan(&out.Name, &out.Quantity, &out.Initial, &out.Round, &out.Version, &out.Sold, &out.Sales)
	if errors.Is(err, pgx.ErrNoRows) {
		return product{}, fmt.Errorf("product %s: not in Postgres", id)
	}
	if err != nil {
		return product{}, fmt.Errorf("read product %s from Postgres: %w", id, err)
	}
	return out, nil
}

// settle decides, from the ledger's rows, each sale of ops whose answer did
// not say whether it sold and whose buyer sent an Idempotency-Key: a row
// under its key means it sold, in the row's round, perhaps after its answer
// came (Late); no row means it sold nothing before the ledger was read,
// and it constrains nothing (a definite failure). A history whose unknown
// outcomes are settled has far fewer orders to try (see docs/loadtest.md).
// It returns how many it settled.
func settle(ops []history.Op, rows []verdict.LedgerRow) int {
	round := map[string]int64{}
	for _, r := range rows {
		if r.Key != "" {
			round[r.Key] = r.Round
		}
	}
	n := 0
	for i := range ops {
		op := &ops[i]
		if op.Kind != history.Sale || op.Outcome != history.Unknown || op.Key == "" {
			continue
		}
		n++
		if r, ok := round[op.Key]; ok {
			op.Outcome, op.Round, op.Remaining, op.Late = history.Sold, int(r), -1, true
		} else {
			op.Outcome = history.Failed
		}
	}
	return n
}
