package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// SalesAtWork counts the sale transactions of the database at pgURL that
// sit idle after locking the stock row (a lock holder's claim, which
// starts WITH claimed AS (UPDATE stock ...), a decrement, or forupdate's
// SELECT ... FOR UPDATE): inside their critical
// section, holding the row, doing the simulated work
// (INVENTORY_WORK_DELAY).
//
// It matches the statement, not just "idle in transaction": a replica's
// invariant watchdog reads in one transaction of several statements every
// second, and a fault or a check timed by one of those lands before the
// sale has begun (a clean clone's make test failed so). And the statement
// must have run (the transaction has an xid, which a row lock or a write
// assigns): pgx prepares a statement new to its connection in a round trip
// of its own, after which the session is idle in the transaction with that
// statement as its query, before it has run.
func SalesAtWork(t testing.TB, pgURL string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to %s: %v", pgURL, err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'
		  AND backend_xid IS NOT NULL
		  AND (query ~ '^\s*(WITH claimed AS \(\s*)?UPDATE stock SET ' OR query ~ '^\s*SELECT .* FROM stock WHERE .* FOR UPDATE\s*$')`).Scan(&n)
	if err != nil {
		t.Fatalf("read pg_stat_activity: %v", err)
	}
	return n
}
