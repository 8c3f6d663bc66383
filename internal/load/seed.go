package load

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SeedLedger makes the fleet's ledger at least rows long before a run, to
// measure reads against a large ledger (--readers with --seed-ledger): it
// restocks product id to rows units through the API, then, straight in
// Postgres and in one transaction, writes rows one-unit sales of it and
// takes them off its stock, so the product is sold out and its ledger adds
// up (no invariant of anyone's is broken). It returns the ledger's length
// after.
func SeedLedger(ctx context.Context, c *Client, pgURL, id string, rows int64) (int64, error) {
	if _, err := c.restock(ctx, id, rows); err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, fmt.Errorf("seed the ledger: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var total int64
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO sales (product_id, round, quantity, strategy, instance)
			SELECT s.product_id, s.round, 1, 'seed', 'loadtest'
			FROM stock s, generate_series(1, $2::bigint)
			WHERE s.product_id = $1`, id, rows)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != rows {
			return fmt.Errorf("wrote %d rows, want %d", tag.RowsAffected(), rows)
		}
		if _, err := tx.Exec(ctx, `UPDATE stock SET quantity = quantity - $2, updated_at = now() WHERE product_id = $1`, id, rows); err != nil {
			return err
		}
		// The round's ledger totals, which every ledger writer keeps
		// (migrations/00009_round_totals.sql).
		if _, err := tx.Exec(ctx, `
			INSERT INTO round_totals AS t (product_id, round, units, sales)
			SELECT product_id, round, $2, $2 FROM stock WHERE product_id = $1
			ON CONFLICT (product_id, round) DO UPDATE SET units = t.units + EXCLUDED.units, sales = t.sales + EXCLUDED.sales`, id, rows); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM sales`).Scan(&total)
	})
	if err != nil {
		return 0, fmt.Errorf("seed the ledger with %d sales of %s: %w", rows, id, err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE sales`); err != nil {
		return 0, fmt.Errorf("analyze the seeded ledger: %w", err)
	}
	return total, nil
}
