package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// TestSetNXBreaksWhenTheSectionOutlivesTheTTL shows, step by step, what the
// naive lock does once a critical section outlives its TTL: the key
// expires under holder A, B takes the lock while A still works, A's
// unconditional DEL deletes B's lock, and C takes it while B still works —
// three holders, none of them told.
func TestSetNXBreaksWhenTheSectionOutlivesTheTTL(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	ctx := context.Background()
	const key = "setnx:{broken}"
	naive := NewSetNX(rdb, Options{Options: lock.Options{TTL: 50 * time.Millisecond, Wait: 5 * time.Second}})

	unlockA, err := naive.Lock(ctx, key)
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	if pttl, err := rdb.PTTL(ctx, key).Result(); err != nil || pttl <= 0 || pttl > 50*time.Millisecond {
		t.Fatalf("PTTL %s after Lock = %v, %v; want the 50ms TTL", key, pttl, err)
	}
	// A is still in its critical section when the key expires.
	testenv.WaitFor(t, key+" to expire (its TTL is 50ms)", 5*time.Second, func() bool { return rdb.Exists(ctx, key).Val() == 0 })
	unlockB, err := naive.Lock(ctx, key)
	if err != nil {
		t.Fatalf("B: Lock after A's key expired = %v, want the lock (A still works: two holders)", err)
	}
	if err := unlockA(ctx); err != nil {
		t.Fatalf("A: unlock = %v", err)
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("after A's unlock, EXISTS %s = %d, %v; want 0: A's DEL deleted B's lock", key, n, err)
	}
	unlockC, err := naive.Lock(ctx, key)
	if err != nil {
		t.Fatalf("C: Lock while B holds = %v, want the lock (B's key was deleted by A: two holders again)", err)
	}
	_ = unlockB(ctx)
	_ = unlockC(ctx)
}

// TestSetNXExcludesWhileTheTTLHolds: while no critical section outlives the
// TTL, the naive lock does exclude (which is why it looks fine in a quick
// test), and a waiter gives up at its Wait budget with lock.ErrTimeout.
func TestSetNXExcludesWhileTheTTLHolds(t *testing.T) {
	url := sharedRedis(t)
	c1, c2 := client(t, url), client(t, url)
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 30 * time.Second}}
	acquire := func(s *SetNX) acquireFunc {
		return func(ctx context.Context, _ int) (func() error, error) {
			unlock, err := s.Lock(ctx, "setnx:{overlap}")
			if err != nil {
				return nil, err
			}
			return func() error { return unlock(ctx) }, nil
		}
	}
	overlaps, entries, lost := runOverlap(t, []*redis.Client{c1, c2}, []acquireFunc{acquire(NewSetNX(c1, opts)), acquire(NewSetNX(c2, opts))}, 16, 25)
	if overlaps != 0 || lost != 0 || entries != 16*25 {
		t.Errorf("SetNX with a TTL no section outlives: %d overlaps, %d lost updates in %d sections; want 0, 0 in %d", overlaps, lost, entries, 16*25)
	}

	ctx := context.Background()
	unlock, err := NewSetNX(c1, opts).Lock(ctx, "setnx:{held}")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	defer func() { _ = unlock(ctx) }()
	_, err = NewSetNX(c2, Options{Options: lock.Options{Wait: 30 * time.Millisecond}}).Lock(ctx, "setnx:{held}")
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock of a held key with Wait 30ms = %v, want lock.ErrTimeout wrapping DeadlineExceeded", err)
	}
}

// TestSetNXHealsAKeyLeftWithoutATTL: a holder that died between SETNX and
// PEXPIRE left the key with no TTL. The seeds' lock is then taken for good;
// a waiter here gives the key its TTL and gets the lock once it expires.
func TestSetNXHealsAKeyLeftWithoutATTL(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	ctx := context.Background()
	const key = "setnx:{wedged}"
	if err := rdb.Set(ctx, key, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	naive := NewSetNX(rdb, Options{Options: lock.Options{TTL: 100 * time.Millisecond, Wait: 10 * time.Second}})
	unlock, err := naive.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock of a key left without a TTL = %v, want the lock once the TTL the waiter gave it ran out", err)
	}
	if pttl, err := rdb.PTTL(ctx, key).Result(); err != nil || pttl <= 0 {
		t.Errorf("PTTL %s once held = %v, %v; want a TTL", key, pttl, err)
	}
	if err := unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
