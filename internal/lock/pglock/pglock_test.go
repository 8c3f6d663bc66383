package pglock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"inventory/internal/lock"
	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newDB returns a fresh migrated database's URL and a pool on it ("one
// replica"); more pools on the URL are more replicas.
func newDB(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	url := testenv.PostgresURL(t)
	pool := newPool(t, url)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	return url, pool
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestExpiryTakeOverAndFence: a lease ends at its TTL (its Context is
// cancelled with lock.ErrExpired), another locker then takes the row over with a
// larger fence, the expired holder's release frees nothing, and fences keep
// growing across releases and take-overs.
func TestExpiryTakeOverAndFence(t *testing.T) {
	url, pool := newDB(t)
	ctx := context.Background()
	short := New(pool, Options{Options: lock.Options{TTL: 300 * time.Millisecond}})
	other := New(newPool(t, url), Options{Options: lock.Options{TTL: 10 * time.Second}})

	var fences []int64
	a, err := short.Lock(ctx, "expiry")
	if err != nil {
		t.Fatalf("a: Lock = %v", err)
	}
	fences = append(fences, a.Fence().Token)
	if _, err := other.TryLock(ctx, "expiry"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock while a holds = %v, want lock.ErrNotAcquired", err)
	}
	var acquired, expires time.Time
	if err := pool.QueryRow(ctx, `SELECT acquired_at, expires_at FROM locks WHERE name = 'expiry'`).Scan(&acquired, &expires); err != nil {
		t.Fatalf("read lock row: %v", err)
	}
	if d := expires.Sub(acquired); d != 300*time.Millisecond {
		t.Errorf("lock row: expires_at - acquired_at = %v, want the TTL 300ms, on Postgres' clock", d)
	}

	select {
	case <-a.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("a's Context not cancelled 5s after its 300ms TTL")
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, lock.ErrLost) || !errors.Is(cause, lock.ErrExpired) {
		t.Errorf("a's Context cause = %v, want lock.ErrLost and lock.ErrExpired", cause)
	}
	if err := a.Err(); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("a.Err() after its deadline = %v, want lock.ErrExpired", err)
	}
	// Postgres' expiry is no earlier than a's local deadline: poll until it passes.
	var b lock.Lease
	testenv.WaitFor(t, "b to take the expired lock over", 5*time.Second, func() bool {
		b, err = other.TryLock(ctx, "expiry")
		if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("b: TryLock = %v", err)
		}
		return err == nil
	})
	fences = append(fences, b.Fence().Token)
	if err := a.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Errorf("a.Release after b took over = %v, want lock.ErrLost", err)
	}
	if _, err := short.TryLock(ctx, "expiry"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock after the expired holder's release = %v, want lock.ErrNotAcquired: b still holds", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("b.Release = %v, want nil", err)
	}
	if err := b.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("b.Release twice = %v, want lock.ErrNotHeld", err)
	}
	if err := b.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Errorf("b.Err() after Release = %v, want lock.ErrReleased", err)
	}
	for i := range 3 {
		l, err := other.Lock(ctx, "expiry")
		if err != nil {
			t.Fatalf("Lock %d after releases: %v", i, err)
		}
		fences = append(fences, l.Fence().Token)
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release %d: %v", i, err)
		}
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences %v: not strictly increasing at %d", fences, i)
		}
	}
}

// TestReleaseOnlyByHolder: a lease whose token is not the row's (a forged
// one here) frees nothing, and the holder's release still works.
func TestReleaseOnlyByHolder(t *testing.T) {
	_, pool := newDB(t)
	ctx := context.Background()
	l := New(pool, Options{})
	held, err := l.Lock(ctx, "mine")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	forged := l.grant(ctx, "mine", "not-the-holders-token", held.Fence().Token, time.Now(), func() {})
	if err := forged.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release by a non-holder = %v, want lock.ErrNotHeld", err)
	}
	if _, err := l.TryLock(ctx, "mine"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock after a non-holder's release = %v, want lock.ErrNotAcquired", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Errorf("holder's Release = %v, want nil", err)
	}
	if _, err := l.TryLock(ctx, "mine"); err != nil {
		t.Errorf("TryLock after the holder's release = %v, want a lease", err)
	}
}

// TestWaiting: a waiter gets the lock once the holder releases it; it gives
// up at its Wait budget or when its context is cancelled, with lock.ErrTimeout
// wrapping the context's error, and leaves the lock alone.
func TestWaiting(t *testing.T) {
	url, pool := newDB(t)
	ctx := context.Background()
	holder := New(pool, Options{Options: lock.Options{TTL: 30 * time.Second}})
	waiter := New(newPool(t, url), Options{Options: lock.Options{Wait: 10 * time.Second}})
	h, err := holder.Lock(ctx, "wait")
	if err != nil {
		t.Fatalf("holder: Lock = %v", err)
	}

	t.Run("Wait budget", func(t *testing.T) {
		short := New(pool, Options{Options: lock.Options{Wait: 50 * time.Millisecond}})
		began := time.Now()
		_, err := short.Lock(ctx, "wait")
		if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock with Wait 50ms on a held lock = %v, want lock.ErrTimeout wrapping DeadlineExceeded", err)
		}
		if took := time.Since(began); took < 50*time.Millisecond {
			t.Errorf("Lock with Wait 50ms gave up after %v, before its Wait", took)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		db := &countingDB{DB: pool}
		done := make(chan error, 1)
		go func() {
			_, err := New(db, Options{Options: lock.Options{Wait: 10 * time.Second}}).Lock(cctx, "wait")
			done <- err
		}()
		testenv.WaitFor(t, "the waiter to try twice", 5*time.Second, func() bool { return db.queries.Load() >= 2 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
				t.Errorf("Lock with its context cancelled = %v, want lock.ErrTimeout wrapping context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Lock did not return within 5s of its context being cancelled")
		}
	})
	if h.Err() != nil {
		t.Fatalf("holder's lease after the waiters gave up: %v, want held", h.Err())
	}
	t.Run("released", func(t *testing.T) {
		type result struct {
			l   lock.Lease
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := waiter.Lock(ctx, "wait")
			done <- result{l, err}
		}()
		if err := h.Release(ctx); err != nil {
			t.Fatalf("holder: Release = %v", err)
		}
		// The waiter answers within its Wait (10s) whatever happens; a
		// loaded machine may take seconds to let it poll again.
		r := <-done
		switch {
		case r.err != nil:
			t.Errorf("waiter: Lock = %v, want the lock once released", r.err)
		case r.l.Fence().Token <= h.Fence().Token:
			t.Errorf("waiter's fence %d, holder's %d: want larger", r.l.Fence().Token, h.Fence().Token)
		}
	})
}

// TestDatabaseDown: an unreachable Postgres is an error, not contention.
func TestDatabaseDown(t *testing.T) {
	url, _ := newDB(t)
	pool := newPool(t, url)
	pool.Close()
	_, err := New(pool, Options{}).TryLock(context.Background(), "down")
	if err == nil || errors.Is(err, lock.ErrNotAcquired) || errors.Is(err, lock.ErrTimeout) {
		t.Errorf("TryLock on a closed pool = %v, want the database error", err)
	}
	var e *lock.Error
	if !errors.As(err, &e) || e.Backend != Backend || e.Op != "trylock" || e.Key != "down" {
		t.Errorf("TryLock on a closed pool = %v, want *lock.Error{pglock, trylock, down}", err)
	}
}

// countingDB counts the statements a Locker sends.
type countingDB struct {
	DB
	queries atomic.Int64
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.queries.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.queries.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

// triesObserver records the statements each acquisition made.
type triesObserver struct {
	mu    sync.Mutex
	tries []int
}

func (o *triesObserver) Acquired(_ string, err error, _ time.Duration, n int) {
	if err == nil {
		o.mu.Lock()
		o.tries = append(o.tries, n)
		o.mu.Unlock()
	}
}
func (*triesObserver) Lost(string, error)                    {}
func (*triesObserver) Renewed(string, error)                 {}
func (*triesObserver) Released(string, time.Duration, error) {}

// TestLocalWaitersQueueAtTheGate: 32 goroutines of one process take one
// lock 10 times each. Only the gate's holder talks to Postgres, so each
// acquisition is one statement: the lock is free when its turn comes.
// Afterwards no gate is left behind.
func TestLocalWaitersQueueAtTheGate(t *testing.T) {
	_, pool := newDB(t)
	obs := &triesObserver{}
	l := New(pool, Options{Options: lock.Options{Observer: obs}})
	var wg sync.WaitGroup
	var inside atomic.Int32
	for range 32 {
		wg.Go(func() {
			for range 10 {
				lease, err := l.Lock(context.Background(), "gated")
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				inside.Add(-1)
				if err := lease.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.tries) != 320 {
		t.Fatalf("%d acquisitions observed, want 320", len(obs.tries))
	}
	for i, n := range obs.tries {
		if n != 1 {
			t.Fatalf("acquisition %d made %d statements, want 1: local waiters must not poll Postgres", i, n)
		}
	}
	if n := l.waiters.Len(); n != 0 {
		t.Errorf("%d names still queued after every lease was released", n)
	}
}

// lostReplyDB runs the first acquire for real and then reports it failed
// (its reply lost, as on a dropped connection), and holds every release
// until unblock is closed (a database that answers no more).
type lostReplyDB struct {
	DB
	drop    atomic.Bool
	unblock chan struct{}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (d *lostReplyDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if sql == acquireSQL && d.drop.CompareAndSwap(true, false) {
		var fence int64
		if err := d.DB.QueryRow(ctx, sql, args...).Scan(&fence); err != nil {
			return errRow{err}
		}
		return errRow{errors.New("connection reset after the statement ran")}
	}
	return d.DB.QueryRow(ctx, sql, args...)
}

func (d *lostReplyDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if sql == releaseSQL {
		select {
		case <-d.unblock:
		case <-ctx.Done():
			return pgconn.CommandTag{}, ctx.Err()
		}
	}
	return d.DB.Exec(ctx, sql, args...)
}

// TestCleanupAfterLostReplyWithinBudget: an acquire that ran but whose
// reply was lost is cleaned up (the row freed by token) without holding
// the caller past its budget when the database is slow to answer: the
// cleanup goes on in the background, and Close waits for it.
func TestCleanupAfterLostReplyWithinBudget(t *testing.T) {
	_, pool := newDB(t)
	ctx := context.Background()
	db := &lostReplyDB{DB: pool, unblock: make(chan struct{})}
	db.drop.Store(true)
	const wait = 500 * time.Millisecond
	l := New(db, Options{Options: lock.Options{Wait: wait}})
	start := time.Now()
	lease, err := l.Lock(ctx, "lost-reply")
	took := time.Since(start)
	if lease != nil || err == nil {
		t.Fatalf("Lock with its reply lost = %v, %v; want an error", lease, err)
	}
	if took > wait {
		t.Errorf("Lock answered after %v, want within its %v budget: it waited for the hung cleanup", took, wait)
	} else {
		t.Logf("Lock answered after %v (budget %v)", took, wait)
	}
	var token *string
	if err := pool.QueryRow(ctx, `SELECT token FROM locks WHERE name = 'lost-reply'`).Scan(&token); err != nil || token == nil {
		t.Fatalf("the acquire that lost its reply left no held row (token %v, %v): nothing to clean up, the test proves nothing", token, err)
	}
	close(db.unblock)
	l.Close() // waits for the cleanup
	if err := pool.QueryRow(ctx, `SELECT token FROM locks WHERE name = 'lost-reply'`).Scan(&token); err != nil || token != nil {
		t.Errorf("after Close the row's token is %v (%v), want NULL: the cleanup freed nothing", token, err)
	}
}
