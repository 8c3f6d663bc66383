// Package locktest is the contract suite every lock backend's tests run:
// one call, Run, checks that a lock.Locker excludes, fences, bounds its
// waits and reports a lost lease, against the backend's real servers.
package locktest

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/lock"
)

// Config is what the suite needs of a backend.
type Config struct {
	// New returns a Locker with o (the suite sets TTL and Wait), on a
	// client of its own: each call is another process, with its own
	// connections, session and in-process queues. The test's cleanups
	// close it.
	New func(t *testing.T, o lock.Options) lock.Locker
	// Lose takes the lock away from lease behind its holder's back, the
	// way it happens to this backend (delete the key, the node, expire
	// the row), so that another client can take it. It must not wait for
	// the holder to notice.
	Lose func(t *testing.T, lease lock.Lease)
	// SplitVotes says that concurrent tries can all lose to one another
	// (Redlock: each wins a minority of the servers). The suite then
	// wants at most one winner among them instead of exactly one.
	SplitVotes bool
}

// Timing of the suite. None of them is asserted: each bounds a wait, or
// sets a budget the backend must honour.
const (
	long    = 30 * time.Second       // a Wait that is never meant to run out
	short   = 200 * time.Millisecond // a Wait that is meant to run out
	lossTTL = time.Second            // the TTL of a lease the suite has lost
)

// Run runs the contract's cases as subtests of t.
func Run(t *testing.T, c Config) {
	t.Run("Exclusion", func(t *testing.T) { exclusion(t, c) })
	t.Run("OneWinner", func(t *testing.T) { oneWinner(t, c) })
	t.Run("FencesIncrease", func(t *testing.T) { fencesIncrease(t, c) })
	t.Run("WaitBudget", func(t *testing.T) { waitBudget(t, c) })
	t.Run("LeaseContext", func(t *testing.T) { leaseContext(t, c) })
	t.Run("StaleRelease", func(t *testing.T) { staleRelease(t, c) })
	t.Run("Loss", func(t *testing.T) { loss(t, c) })
}

// newKey is a key no other test uses, valid for every backend (a Redis
// hash tag, no '/' for a znode).
func newKey(name string) string { return "lock:{locktest-" + name + "-" + rand.Text()[:8] + "}" }

func mustLock(t *testing.T, l lock.Locker, ctx context.Context, key string) lock.Lease {
	t.Helper()
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock(%q) = %v, want a lease", key, err)
	}
	return lease
}

func mustRelease(t *testing.T, lease lock.Lease) {
	t.Helper()
	if err := lease.Release(context.Background()); err != nil {
		t.Errorf("Release of %q = %v, want nil", lease.Key(), err)
	}
}

// exclusion: goroutines over two clients take one key in turn; no two are
// ever inside at once, no update of a counter read and written inside is
// lost, and each holder's fence is above the previous one's.
func exclusion(t *testing.T, c Config) {
	const goroutines, iters = 8, 10
	lockers := []lock.Locker{c.New(t, lock.Options{Wait: long}), c.New(t, lock.Options{Wait: long})}
	n := sections(t, lockers, newKey("exclusion"), goroutines, iters)
	if n.overlaps != 0 || n.lost != 0 || n.fenceDrops != 0 {
		t.Errorf("%d of %d critical sections overlapped another, %d updates were lost, %d fences were not above the previous holder's; want 0, 0 and 0",
			n.overlaps, n.entries, n.lost, n.fenceDrops)
	}
	if n.entries != goroutines*iters && !t.Failed() {
		t.Errorf("%d critical sections entered, want %d", n.entries, goroutines*iters)
	}
}

// tally is what sections saw.
type tally struct {
	entries    int64 // critical sections entered
	overlaps   int64 // entered while another was inside
	lost       int64 // updates of the counter lost
	fenceDrops int64 // holders whose fence was not above the one before
}

// sections has goroutines, spread over lockers, take key iters times each
// and, inside, read a counter, let the others run, and write it back plus
// one, as a sale does a stock row.
func sections(t *testing.T, lockers []lock.Locker, key string, goroutines, iters int) tally {
	var inside atomic.Int32
	var overlaps, entries, counter, lastFence, fenceDrops atomic.Int64
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-gate
			ctx := context.Background()
			for i := range iters {
				lease, err := lockers[g%len(lockers)].Lock(ctx, key)
				if err != nil {
					t.Errorf("goroutine %d, iteration %d: Lock(%q) = %v, want a lease", g, i, key, err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				entries.Add(1)
				if f := lease.Fence().Token; f <= lastFence.Load() {
					fenceDrops.Add(1)
				} else {
					lastFence.Store(f)
				}
				n := counter.Load()
				for range 10 {
					runtime.Gosched() // let another holder in, if the lock would
				}
				counter.Store(n + 1)
				inside.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Errorf("goroutine %d, iteration %d: Release = %v, want nil", g, i, err)
				}
			}
		})
	}
	close(gate)
	wg.Wait()
	return tally{entries: entries.Load(), overlaps: overlaps.Load(), lost: entries.Load() - counter.Load(), fenceDrops: fenceDrops.Load()}
}

// oneWinner: tries on a free key from goroutines over two clients at once:
// one wins (at most one with SplitVotes), the others get ErrNotAcquired.
func oneWinner(t *testing.T, c Config) {
	const tries = 10
	lockers := []lock.Locker{c.New(t, lock.Options{}), c.New(t, lock.Options{})}
	key := newKey("one-winner")
	gate := make(chan struct{})
	var mu sync.Mutex
	var winners []lock.Lease
	var wg sync.WaitGroup
	for g := range tries {
		wg.Go(func() {
			<-gate
			lease, err := lockers[g%2].TryLock(context.Background(), key)
			switch {
			case err == nil:
				mu.Lock()
				winners = append(winners, lease)
				mu.Unlock()
			case !errors.Is(err, lock.ErrNotAcquired):
				t.Errorf("TryLock(%q) #%d = %v, want a lease or ErrNotAcquired", key, g, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if len(winners) > 1 || (len(winners) == 0 && !c.SplitVotes) {
		t.Errorf("%d concurrent TryLock(%q): %d won, want exactly 1", tries, key, len(winners))
	}
	for _, l := range winners {
		mustRelease(t, l)
	}
}

// fencesIncrease: holders of one key, taking turns over two clients, get
// fences of one Backend, each above the one before.
func fencesIncrease(t *testing.T, c Config) {
	lockers := []lock.Locker{c.New(t, lock.Options{}), c.New(t, lock.Options{})}
	key := newKey("fences")
	ctx := context.Background()
	var prev lock.Fence
	for i := range 6 {
		lease := mustLock(t, lockers[i%2], ctx, key)
		f := lease.Fence()
		switch {
		case f.Backend == "":
			t.Errorf("holder %d: fence %+v names no Backend", i, f)
		case i > 0 && f.Backend != prev.Backend:
			t.Errorf("holder %d: fence %+v, the one before %+v: want one Backend", i, f, prev)
		case i > 0 && f.Token <= prev.Token:
			t.Errorf("holder %d: fence %d, the one before %d: want larger", i, f.Token, prev.Token)
		}
		prev = f
		mustRelease(t, lease)
	}
}

// waitBudget: a waiter for a held key gives up with ErrTimeout, wrapping
// context.DeadlineExceeded when its Locker's Wait ran out and
// context.Canceled when its ctx was cancelled; the holder keeps the lock,
// and the next Lock after its release succeeds.
func waitBudget(t *testing.T, c Config) {
	holder := c.New(t, lock.Options{})
	key := newKey("wait")
	ctx := context.Background()
	held := mustLock(t, holder, ctx, key)

	if l, err := c.New(t, lock.Options{Wait: short}).Lock(ctx, key); l != nil || !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock(%q) of a held key with Wait %v = %v, %v; want ErrTimeout wrapping context.DeadlineExceeded", key, short, l, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := time.AfterFunc(short, cancel)
	defer stop.Stop()
	if l, err := c.New(t, lock.Options{Wait: long}).Lock(cctx, key); l != nil || !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock(%q) of a held key, ctx cancelled = %v, %v; want ErrTimeout wrapping context.Canceled", key, l, err)
	}
	if err := held.Err(); err != nil {
		t.Errorf("the holder's Err() after the waiters gave up = %v, want nil", err)
	}
	mustRelease(t, held)
	next := mustLock(t, c.New(t, lock.Options{Wait: long}), ctx, key)
	mustRelease(t, next)
}

// leaseContext: a lease's Context derives from the ctx it was taken with;
// that ctx ending is not a loss. Done is Context().Done(), and Release
// cancels the Context with ErrReleased.
func leaseContext(t *testing.T, c Config) {
	l := c.New(t, lock.Options{})
	key := newKey("context")
	ctx, cancel := context.WithCancel(context.Background())
	lease := mustLock(t, l, ctx, key)
	if lease.Done() != lease.Context().Done() {
		t.Errorf("Done() is not Context().Done()")
	}
	select {
	case <-lease.Done():
		t.Fatalf("lease's Context done while held: %v", context.Cause(lease.Context()))
	default:
	}
	if lease.Key() != key {
		t.Errorf("Key() = %q, want %q", lease.Key(), key)
	}
	cancel()
	<-lease.Done() // derived from ctx: closed by cancel, at once
	if err := lease.Err(); err != nil {
		t.Errorf("Err() after the caller's ctx ended = %v, want nil: that is not a loss", err)
	}
	mustRelease(t, lease)
	if err := lease.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Errorf("Err() after Release = %v, want ErrReleased", err)
	}

	lease = mustLock(t, l, context.Background(), key)
	mustRelease(t, lease)
	if cause := context.Cause(lease.Context()); !errors.Is(cause, lock.ErrReleased) {
		t.Errorf("Context's cause after Release = %v, want ErrReleased", cause)
	}
}

// staleRelease: a lease released once says ErrNotHeld when released again,
// also once a lease of another client, or of its own, holds the key, which
// keeps it.
func staleRelease(t *testing.T, c Config) {
	a, b, other := c.New(t, lock.Options{}), c.New(t, lock.Options{}), c.New(t, lock.Options{})
	key := newKey("stale")
	ctx := context.Background()
	stale := mustLock(t, a, ctx, key)
	mustRelease(t, stale)
	if err := stale.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
	for _, h := range []struct {
		who string
		l   lock.Locker
	}{{"another client", b}, {"its own client", a}} {
		holder := mustLock(t, h.l, ctx, key)
		if err := stale.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("stale Release while %s holds the key = %v, want ErrNotHeld", h.who, err)
		}
		stillHeld(t, other, holder)
		mustRelease(t, holder)
	}
}

// stillHeld checks that holder's lock is still its own: its lease holds
// and a try from another client fails.
func stillHeld(t *testing.T, other lock.Locker, holder lock.Lease) {
	t.Helper()
	if err := holder.Err(); err != nil {
		t.Errorf("holder's Err() = %v, want nil", err)
	}
	if l, err := other.TryLock(context.Background(), holder.Key()); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock(%q) while held = %v, %v; want ErrNotAcquired", holder.Key(), l, err)
		if l != nil {
			_ = l.Release(context.Background())
		}
	}
}

// loss: a lock taken away behind its holder's back (Config.Lose) cancels
// the lease's Context with a cause wrapping ErrLost, Err says so, and the
// holder's Release reports the loss, harmlessly for the next holder, whose
// fence is larger.
func loss(t *testing.T, c Config) {
	a := c.New(t, lock.Options{TTL: lossTTL})
	key := newKey("loss")
	ctx := context.Background()
	lease := mustLock(t, a, ctx, key)
	c.Lose(t, lease)
	select {
	case <-lease.Done():
	case <-time.After(long):
		t.Fatalf("lease's Context not done %v after its lock was taken away (TTL %v)", long, lossTTL)
	}
	if cause := context.Cause(lease.Context()); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("lease's Context cause = %v, want ErrLost", cause)
	}
	if err := lease.Err(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", err)
	}
	next := mustLock(t, c.New(t, lock.Options{Wait: long}), ctx, key)
	if f, lost := next.Fence(), lease.Fence(); f.Backend != lost.Backend || f.Token <= lost.Token {
		t.Errorf("next holder's fence %+v, the lost lease's %+v: want larger, of one Backend", f, lost)
	}
	if err := lease.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Release after the loss = %v, want ErrLost", err)
	}
	stillHeld(t, c.New(t, lock.Options{}), next)
	mustRelease(t, next)
}
