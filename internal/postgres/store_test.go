package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"inventory/internal/inventory"
	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestDBErrSaysWhatIsWorthRetrying(t *testing.T) {
	tests := []struct {
		code        string
		unavailable bool // a definite failure that trying again may cure
		lockTimeout bool
	}{
		{"40001", true, false},  // serialization failure: rolled back
		{"40P01", true, false},  // deadlock detected: rolled back
		{"57P01", true, false},  // admin shutdown
		{"08006", true, false},  // connection failure
		{"53300", true, false},  // too many connections
		{"55P03", false, true},  // lock_not_available
		{"23505", false, false}, // unique violation: a bug or a conflict, not the weather
		{"22003", false, false}, // numeric value out of range
	}
	for _, tt := range tests {
		err := dbErr("op", &pgconn.PgError{Code: tt.code})
		if got := errors.Is(err, inventory.ErrUnavailable); got != tt.unavailable {
			t.Errorf("dbErr(op, SQLSTATE %s) wraps ErrUnavailable = %v, want %v (%v)", tt.code, got, tt.unavailable, err)
		}
		if got := errors.Is(err, inventory.ErrLockTimeout); got != tt.lockTimeout {
			t.Errorf("dbErr(op, SQLSTATE %s) wraps ErrLockTimeout = %v, want %v (%v)", tt.code, got, tt.lockTimeout, err)
		}
	}
}

// TestCommitErr checks which failed COMMITs count as "certainly not
// committed" (the lua strategy then gives its units back) and which leave the
// outcome unknown (it keeps them).
func TestCommitErr(t *testing.T) {
	cases := []struct {
		name        string
		err         error
		wantUnknown bool
	}{
		{"server error", &pgconn.PgError{Code: "40001", Message: "serialization failure"}, false},
		{"server shutting down", &pgconn.PgError{Code: "57P01", Message: "terminating connection"}, false},
		{"commit turned rollback", pgx.ErrTxCommitRollback, false},
		// pgx says "conn closed, safe to retry" also when the connection
		// broke after COMMIT was sent (TestCommitReplyLost), so it is no
		// proof that nothing committed: the ledger decides.
		{"driver says safe to retry", fmt.Errorf("wrapped: %w", safeToRetry{}), true},
		{"network error while waiting", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{"deadline while waiting", context.DeadlineExceeded, true},
	}
	for _, c := range cases {
		err := commitErr(c.err)
		if got := errors.Is(err, inventory.ErrOutcomeUnknown); got != c.wantUnknown {
			t.Errorf("commitErr(%s: %v): outcome unknown = %v, want %v", c.name, c.err, got, c.wantUnknown)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("commitErr(%s) = %v, want the driver error kept in the chain", c.name, err)
		}
		if c.wantUnknown && !errors.Is(err, inventory.ErrUnavailable) {
			t.Errorf("commitErr(%s) = %v, want ErrUnavailable", c.name, err)
		}
	}
}

// safeToRetry is a driver error that claims nothing was sent.
type safeToRetry struct{}

func (safeToRetry) Error() string     { return "not sent" }
func (safeToRetry) SafeToRetry() bool { return true }

// newStore is a Store on a fresh, migrated database of the test's own.
func newStore(t testing.TB) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	return NewStore(pool, Limits{}), pool
}

// restock creates or restocks product id to q, closing no round.
func restock(t *testing.T, st *Store, id string, q int64) {
	t.Helper()
	noMarks := func(context.Context, *RoundTx, string, int) error { return nil }
	if _, err := st.Restock(context.Background(), inventory.RestockOrder{ProductID: id, Quantity: q}, noMarks); err != nil {
		t.Fatalf("Restock(%q, %d): %v", id, q, err)
	}
}

// sell records one guarded sale of n units of id.
func sell(t *testing.T, st *Store, id string, n int64) inventory.Sale {
	t.Helper()
	sale, err := st.Record(context.Background(), inventory.Order{ProductID: id, Quantity: n}, inventory.Atomic, "replica-a",
		func(ctx context.Context, tx *SaleTx) (Decrement, error) { return tx.DecrementIfEnough(ctx, n) })
	if err != nil {
		t.Fatalf("Record(%d of %q): %v", n, id, err)
	}
	return sale
}

// TestFoundSaleTellsWhatItLeft: a sale found in the ledger after its COMMIT
// reply was lost is answered with the stock it left, not the stock of the
// moment it is found, once other sales have followed it (the history
// checker caught "wrong remaining" answers of atomic, forupdate and lua
// under commit-reply-lost).
func TestFoundSaleTellsWhatItLeft(t *testing.T) {
	st, pool := newStore(t)
	const id = "found-later"
	restock(t, st, id, 10)
	ctx := context.Background()
	first := sell(t, st, id, 3)
	for range 2 {
		sell(t, st, id, 1)
	}
	var saleKey string
	if err := pool.QueryRow(ctx, `SELECT sale_key FROM sales WHERE id = $1`, first.ID).Scan(&saleKey); err != nil {
		t.Fatal(err)
	}
	found := inventory.Sale{ProductID: id}
	ok, err := st.lookup(ctx, "BEGIN", saleKey, &found)
	if err != nil || !ok || found.ID != first.ID || found.Remaining != 7 {
		t.Errorf("lookup of the first sale after two more = %+v, %v, %v; want sale %d with the 7 it left (not the 5 left now)", found, ok, err, first.ID)
	}
}

// TestExistsAsksPostgresOncePerProduct: a lock sale checks that its
// product exists before it takes a lock (an unknown product must get no
// lock key, node or fence); a product found once is not asked about again,
// so the check costs the hot product no statement per sale. An unknown
// product is asked about every time, and stays unknown.
func TestExistsAsksPostgresOncePerProduct(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	restock(t, st, "known", 1)
	if err := st.Exists(ctx, "known"); err != nil {
		t.Fatalf("Exists(known) = %v, want nil", err)
	}
	if err := st.Exists(ctx, "unknown"); !errors.Is(err, inventory.ErrNotFound) {
		t.Fatalf("Exists(unknown) = %v, want ErrNotFound", err)
	}
	pool.Close() // every statement fails from here on
	if err := st.Exists(ctx, "known"); err != nil {
		t.Errorf("Exists(known) again, Postgres out of reach = %v, want nil without a statement", err)
	}
	if err := st.Exists(ctx, "unknown"); err == nil || errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("Exists(unknown) again, Postgres out of reach = %v, want the failed statement's error", err)
	}
}
