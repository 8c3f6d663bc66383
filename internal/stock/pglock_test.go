package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/pglock"
	"inventory/internal/lock/redislock"
	"inventory/internal/redis"
)

// TestPgLockOverrunRollsBack: a critical section that outlives pglock's TTL
// is cancelled at the lease's deadline and rolled back, instead of
// committing while another replica may have taken the lock row over.
func TestPgLockOverrunRollsBack(t *testing.T) {
	e := newEnv(t)
	const id = "pg-overrun"
	e.restock(t, id, 10)
	d := e.deps("replica-a")
	d.Lock.TTL = 200 * time.Millisecond
	d.WorkDelay = 400 * time.Millisecond
	_, err := e.seller(t, inventory.PgLock, d).Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1})
	if !errors.Is(err, inventory.ErrLockLost) {
		t.Errorf("Sell with 400ms of work under a 200ms pglock = %v, want ErrLockLost", err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 10 || p.Sales != 0 {
		t.Errorf("stock %d with %d ledger rows after the overrun, want 10 and 0", p.Quantity, p.Sales)
	}
}

// TestPgLockStaleHolderRefused: holder A's lease expires (a pause past its
// TTL, say) before it writes; B takes the lock row over and sells; when A
// resumes and writes with its older fence, Postgres refuses it as a breach.
// The Redis locks' fence is not involved, and the reverse holds too.
func TestPgLockStaleHolderRefused(t *testing.T) {
	e := newEnv(t)
	const id = "pg-stale"
	e.restock(t, id, 10)
	ctx := context.Background()
	locker := pglock.New(e.pool, pglock.Options{Options: lock.Options{TTL: 100 * time.Millisecond}})
	a, err := locker.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	select { // A is "paused" past its lease
	case <-a.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("A's lease Context not cancelled 5s after its 100ms TTL")
	}
	var b lock.Lease
	waitFor(t, "B to take the expired lock row over", 5*time.Second, func() bool {
		b, err = locker.TryLock(ctx, redis.LockKey(id))
		return err == nil
	})
	defer func() { _ = b.Release(ctx) }()

	sell := func(counter string, fence int64) error {
		_, err := e.store.SellFenced(ctx, inventory.Order{ProductID: id, Quantity: 1}, inventory.PgLock, "test", lock.Fence{Backend: counter, Token: fence}, 0)
		return err
	}
	steps := []struct {
		who     string
		counter string
		fence   int64
		want    error
	}{
		{"B (pglock, the holder)", pglock.Backend, b.Fence().Token, nil},
		{"A (pglock, stale)", pglock.Backend, a.Fence().Token, inventory.ErrLockBreach},
		{"a redis holder with a token below pglock's", redislock.Backend, 1, nil},
		{"a stale redis holder", redislock.Backend, 1, inventory.ErrLockBreach},
		{"B again (each hold claims once)", pglock.Backend, b.Fence().Token, inventory.ErrLockBreach},
	}
	sold := int64(0)
	for _, s := range steps {
		err := sell(s.counter, s.fence)
		if (s.want == nil) != (err == nil) || (s.want != nil && (!errors.Is(err, s.want) || !errors.Is(err, inventory.ErrLockLost))) {
			t.Errorf("%s: SellFenced(%q, 1, fence %d) = %v, want %v", s.who, id, s.fence, err, s.want)
		}
		if err == nil {
			sold++
		}
	}
	if p := e.checkLedger(t, id); p.Quantity != 10-sold || p.Sales != sold {
		t.Errorf("stock %d, %d ledger rows; want %d and %d", p.Quantity, p.Sales, 10-sold, sold)
	}
}
