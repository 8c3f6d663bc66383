package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSalesAtWorkCountsOnlyAStatementThatRan: a claim pgx has prepared but
// not yet run leaves its session idle in the transaction with the claim as
// its query; only once it has run (and locked the row) is the sale at work.
func TestSalesAtWorkCountsOnlyAStatementThatRan(t *testing.T) {
	ctx := context.Background()
	url := PostgresURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`CREATE TABLE stock (product_id text PRIMARY KEY, fence bigint NOT NULL, updated_at timestamptz)`,
		`INSERT INTO stock VALUES ('p', 0, now())`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	const claim = `UPDATE stock SET fence = $2, updated_at = now() WHERE product_id = $1 AND fence < $2`
	if _, err := tx.Prepare(ctx, "claim", claim); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if n := SalesAtWork(t, url); n != 0 {
		t.Errorf("SalesAtWork with the claim prepared, not run = %d, want 0", n)
	}
	if _, err := tx.Exec(ctx, "claim", "p", 1); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if n := SalesAtWork(t, url); n != 1 {
		t.Errorf("SalesAtWork with the claim run = %d, want 1", n)
	}
}
