package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inventory/internal/localstack"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// overlapRun has goroutines take key from lockers (round robin) iters times
// each and reports how many critical sections began while another was
// running. lock nil: no lock at all (the control).
func overlapRun(t *testing.T, goroutines, iters int, lock func(ctx context.Context, g int) (func(), error)) (entries, overlaps int64) {
	t.Helper()
	var inside atomic.Int32
	var n, over atomic.Int64
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-gate
			for i := range iters {
				unlock := func() {}
				if lock != nil {
					var err error
					if unlock, err = lock(context.Background(), g); err != nil {
						t.Errorf("goroutine %d, iteration %d: Lock = %v", g, i, err)
						return
					}
				}
				if inside.Add(1) != 1 {
					over.Add(1)
				}
				n.Add(1)
				time.Sleep(50 * time.Microsecond) // the work a lock protects
				inside.Add(-1)
				unlock()
			}
		})
	}
	close(gate)
	wg.Wait()
	return n.Load(), over.Load()
}

// TestMutualExclusion: three Lockers, each with clients of its own (three
// processes), 12 goroutines, one key: no critical section overlaps another.
// The control run without the lock shows the detector sees overlaps.
func TestMutualExclusion(t *testing.T) {
	urls := shared(t)
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 60 * time.Second}}
	lockers := []*Locker{newLocker(t, urls, opts), newLocker(t, urls, opts), newLocker(t, urls, opts)}
	var fences sync.Map
	entries, overlaps := overlapRun(t, 12, 25, func(ctx context.Context, g int) (func(), error) {
		lease, err := lockers[g%3].Lock(ctx, "lock:{excl}")
		if err != nil {
			return nil, err
		}
		if _, dup := fences.LoadOrStore(lease.Fence().Token, g); dup {
			t.Errorf("fence %d handed out twice", lease.Fence().Token)
		}
		return func() {
			if err := lease.Release(ctx); err != nil {
				t.Errorf("Release = %v", err)
			}
		}, nil
	})
	if overlaps != 0 || entries != 12*25 {
		t.Errorf("with the lock: %d entries, %d overlapping; want %d and 0", entries, overlaps, 12*25)
	}
	if _, overlaps := overlapRun(t, 12, 25, nil); overlaps == 0 {
		t.Errorf("without the lock: no overlap seen; the detector cannot see a broken lock")
	}
	noKeys(t, clients(t, urls), "lock:{excl}")
}

// TestFencesIncrease: tokens strictly increase from holder to holder, also
// when the servers' counters disagree and each holder's majority is a
// different pair of servers: the catch-up keeps them ordered.
func TestFencesIncrease(t *testing.T) {
	urls := shared(t)
	ctx := context.Background()
	direct := clients(t, urls)
	const key = "lock:{fences}"
	lockers := []*Locker{newLocker(t, urls, Options{}), newLocker(t, urls, Options{})}
	last := int64(0)
	next := func(who string, l *Locker) {
		t.Helper()
		lease, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatalf("%s: TryLock = %v", who, err)
		}
		if lease.Fence().Token <= last {
			t.Errorf("%s: fence %d after %d, want it larger", who, lease.Fence().Token, last)
		}
		last = lease.Fence().Token
		if err := lease.Release(ctx); err != nil {
			t.Errorf("%s: Release = %v", who, err)
		}
	}
	for i := range 5 {
		next(fmt.Sprintf("holder %d", i), lockers[i%2])
	}
	// Server 0 runs far ahead (say a holder that only got server 0 and one
	// other, many times); then each holder gets a different pair: without
	// the catch-up the pair {1, 2} would hand out a token below server 0's.
	fk, _ := fenceKey(key)
	if err := direct[0].HSet(ctx, fk, "n", 100).Err(); err != nil {
		t.Fatal(err)
	}
	for i, blocked := range []int{2, 0, 1, 2, 0, 1} {
		if err := direct[blocked].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		next(fmt.Sprintf("holder without server %d", blocked), lockers[i%2])
		if err := direct[blocked].Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if last <= 100 {
		t.Errorf("last fence %d, want above server 0's counter (100)", last)
	}
}

// TestWaitBounded: Lock gives up after Options.Wait with lock.ErrTimeout wrapping
// context.DeadlineExceeded and why the last try failed; a cancelled ctx
// ends the wait at once with context.Canceled. Neither leaves a key behind.
func TestWaitBounded(t *testing.T) {
	urls := shared(t)
	ctx := context.Background()
	const key = "lock:{wait}"
	holder, err := newLocker(t, urls, Options{Options: lock.Options{TTL: 10 * time.Second}}).Lock(ctx, key)
	if err != nil {
		t.Fatalf("holder: Lock = %v", err)
	}
	waiter := newLocker(t, urls, Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 200 * time.Millisecond}})

	start := time.Now()
	_, err = waiter.Lock(ctx, key)
	took := time.Since(start)
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("Lock on a held key with Wait 200ms = %v, want lock.ErrTimeout wrapping DeadlineExceeded and lock.ErrNotAcquired", err)
	}
	if took < 200*time.Millisecond {
		t.Errorf("Lock with Wait 200ms gave up after %v, before its Wait", took)
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(cctx, key)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
			t.Errorf("Lock with a cancelled ctx = %v, want lock.ErrTimeout wrapping context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock still waiting 5s after its ctx was cancelled")
	}
	if err := holder.Release(ctx); err != nil {
		t.Errorf("holder: Release = %v", err)
	}
	noKeys(t, clients(t, urls), key)
}

// TestSplitVoteCleansUp: a waiter that wins only a minority each round
// deletes what it won before it retries and when it gives up: nothing of
// its stays on any server.
func TestSplitVoteCleansUp(t *testing.T) {
	urls := shared(t)
	ctx := context.Background()
	direct := clients(t, urls)
	const key = "lock:{split}"
	for _, i := range []int{0, 1} {
		if err := direct[i].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := newLocker(t, urls, Options{Options: lock.Options{Wait: 100 * time.Millisecond}}).Lock(ctx, key)
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("Lock with 2 of 3 servers held by others = %v, want lock.ErrTimeout wrapping lock.ErrNotAcquired", err)
	}
	// Its deletes run in the background, each bounded by ServerTimeout.
	testenv.WaitFor(t, "server 2 to be free after the waiter gave up", 5*time.Second, func() bool { return holders(t, direct, key)[2] == "" })
}

// TestRelease: a second release is harmless (lock.ErrNotHeld), and a release
// by a lease whose validity ended after someone else took the lock over
// (a non-owner now) does not delete the new holder's keys.
func TestRelease(t *testing.T) {
	urls := shared(t)
	ctx := context.Background()
	direct := clients(t, urls)
	const key = "lock:{release}"
	l := newLocker(t, urls, Options{Options: lock.Options{TTL: 150 * time.Millisecond}})
	a, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	select {
	case <-a.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("A's Context not cancelled 5s after its 150ms TTL")
	}
	if !errors.Is(a.Err(), lock.ErrLost) || !errors.Is(context.Cause(a.Context()), lock.ErrExpired) {
		t.Errorf("A after its validity: Err = %v, cause %v; want lock.ErrLost, lock.ErrExpired", a.Err(), context.Cause(a.Context()))
	}
	testenv.WaitFor(t, "A's keys to expire", 5*time.Second, func() bool { h := holders(t, direct, key); return h[0]+h[1]+h[2] == "" })
	b, err := newLocker(t, urls, Options{Options: lock.Options{TTL: 10 * time.Second}}).Lock(ctx, key)
	if err != nil {
		t.Fatalf("B: Lock = %v", err)
	}
	// Lock returns once a majority granted; the third set may still be on
	// its way.
	testenv.WaitFor(t, "B's key on all three servers", 5*time.Second, func() bool { return ours(t, direct, b) == 3 })
	if err := a.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Errorf("A (expired, B holds): Release = %v, want lock.ErrLost", err)
	}
	if n := ours(t, direct, b); n != 3 {
		t.Errorf("B's key on %d of 3 servers after A's release, want 3", n)
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("B: Release = %v", err)
	}
	if err := b.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("B: second Release = %v, want lock.ErrNotHeld", err)
	}
	if !errors.Is(b.Err(), lock.ErrReleased) || !errors.Is(context.Cause(b.Context()), lock.ErrReleased) {
		t.Errorf("B after Release: Err = %v, cause %v; want lock.ErrReleased", b.Err(), context.Cause(b.Context()))
	}
}

// TestQuorum: with one of three servers down Lock still acquires, and
// with one hung (SIGSTOP) it does so without waiting for it (after once,
// if it was the gate); with two down
// it times out with ErrNoQuorum, and acquires again once one is back.
func TestQuorum(t *testing.T) {
	servers, urls := private(t, 3)
	ctx := context.Background()
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 2 * time.Second}, ServerTimeout: 300 * time.Millisecond}
	l := newLocker(t, urls, opts)
	// Each phase has a key of its own: a hung server runs the commands it
	// was sent once it resumes, and may keep a key of an earlier phase
	// until its TTL.
	phase := 0
	lockRelease := func(what string) (time.Duration, error) {
		t.Helper()
		phase++
		start := time.Now()
		lease, err := l.Lock(ctx, fmt.Sprintf("lock:{quorum-%d}", phase))
		took := time.Since(start)
		if err == nil {
			if err := lease.Release(ctx); err != nil {
				t.Errorf("%s: Release = %v", what, err)
			}
		}
		return took, err
	}
	if _, err := lockRelease("all up"); err != nil {
		t.Fatalf("all up: Lock = %v", err)
	}

	if err := localstack.Pause(servers[2].Pid()); err != nil {
		t.Fatal(err)
	}
	// The first try may wait ServerTimeout for server 2, should it be the
	// key's gate; after that it is passed over.
	for i := range 2 {
		took, err := lockRelease("server 2 hung")
		if err != nil {
			t.Errorf("server 2 hung, Lock %d: %v, want a lease from servers 0 and 1", i+1, err)
		}
		if i == 1 && took >= opts.ServerTimeout/2 {
			t.Errorf("server 2 hung: second Lock took %v, want well under its %v ServerTimeout (a majority answered)", took, opts.ServerTimeout)
		}
	}
	if err := syscall.Kill(servers[2].Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	if err := servers[2].Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := lockRelease("server 2 down"); err != nil {
		t.Errorf("server 2 down: Lock = %v, want a lease from servers 0 and 1", err)
	}
	if err := localstack.Pause(servers[1].Pid()); err != nil {
		t.Fatal(err)
	}
	_, err := lockRelease("servers 1 (hung) and 2 (down)")
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, ErrNoQuorum) {
		t.Errorf("servers 1 hung and 2 down: Lock = %v, want lock.ErrTimeout wrapping ErrNoQuorum", err)
	}
	if err := syscall.Kill(servers[1].Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := lockRelease("server 1 back"); err != nil {
		t.Errorf("server 1 back: Lock = %v", err)
	}
}

// TestRestartedServerWhileHeld shows Redlock's known weak spot: A holds
// exactly a majority (servers 0 and 1; server 2 was busy), server 0
// restarts empty, and B wins servers 0 and 2 while A's lease is still
// valid: two holders at once. The fence is the database's defence: with
// the floor at A's token (the database saw A's claim) B's token is newer,
// so A's later writes are refused; with a floor below it B's token is not
// newer than A's, so whichever of them claims second is refused (strict
// "<"). internal/stock's TestRedlockRestartedServer plays this out on
// a stock row.
func TestRestartedServerWhileHeld(t *testing.T) {
	servers, urls := private(t, 3)
	ctx := context.Background()
	direct := clients(t, urls)
	const key = "lock:{restart}"
	for _, floorAtA := range []bool{true, false} {
		t.Run(fmt.Sprintf("floor at A's token=%v", floorAtA), func(t *testing.T) {
			var floor atomic.Int64
			opts := Options{Options: lock.Options{TTL: 30 * time.Second}, FenceFloor: func(context.Context, string) (int64, error) { return floor.Load(), nil }}
			a0, err := newLocker(t, urls, opts).Lock(ctx, key) // counters on every server
			if err != nil {
				t.Fatalf("warm-up: Lock = %v", err)
			}
			_ = a0.Release(ctx)
			// A release under load may not reach every server (its outcome
			// unknown, the key left to its 30 s TTL), nor may the last
			// subtest's: A must start from servers that hold no key.
			for _, c := range direct {
				if err := c.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := direct[2].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			before := scriptCalls(t, direct[2])
			a, err := newLocker(t, urls, opts).Lock(ctx, key)
			if err != nil {
				t.Fatalf("A: Lock = %v", err)
			}
			defer func() { _ = a.Release(ctx) }()
			// Lock returns with a majority; A's try on server 2 may still be
			// on its way, and would win there once the key is deleted below.
			testenv.WaitFor(t, "server 2 to answer A's try", 5*time.Second, func() bool { return scriptCalls(t, direct[2]) > before })
			if n := ours(t, direct, a); n != 2 {
				t.Fatalf("A holds %d servers, want exactly 2", n)
			}
			if err := direct[2].Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := servers[0].Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if floorAtA {
				floor.Store(a.Fence().Token)
			}
			b, err := newLocker(t, urls, opts).TryLock(ctx, key)
			if err != nil {
				t.Fatalf("B after server 0 restarted empty: TryLock = %v, want a lease (Redlock's known breach)", err)
			}
			defer func() { _ = b.Release(ctx) }()
			if a.Err() != nil {
				t.Fatalf("A's lease ended (%v); the overlap was not shown", a.Err())
			}
			t.Logf("two holders at once: A fence %d on servers 0 and 1, B fence %d on servers 0 and 2", a.Fence().Token, b.Fence().Token)
			if floorAtA && b.Fence().Token <= a.Fence().Token {
				t.Errorf("B's fence %d with the floor at A's %d, want larger: the database would not refuse A", b.Fence().Token, a.Fence().Token)
			}
			if !floorAtA && b.Fence().Token > a.Fence().Token {
				t.Logf("B's fence is newer than A's without the floor: the lagging counters happened to allow it")
			}
		})
	}
}

// TestValidity: the lease's deadline is TTL less the drift allowance from
// before the first command, and the keys outlive it on every server.
func TestValidity(t *testing.T) {
	urls := shared(t)
	ctx := context.Background()
	direct := clients(t, urls)
	ttl := 2 * time.Second
	start := time.Now()
	lease, err := newLocker(t, urls, Options{Options: lock.Options{TTL: ttl}}).Lock(ctx, "lock:{validity}")
	if err != nil {
		t.Fatal(err)
	}
	deadline := lease.(*Lease).Deadline()
	defer func() { _ = lease.Release(ctx) }()
	if want := start.Add(ttl - drift(ttl)); deadline.Before(want) || deadline.After(time.Now().Add(ttl-drift(ttl))) {
		t.Errorf("Deadline %v, want between %v and now+TTL−drift", deadline.Sub(start), want.Sub(start))
	}
	// Lock returns with a majority; the third SET may still be on its way.
	testenv.WaitFor(t, "the key on all three servers", 5*time.Second, func() bool { return ours(t, direct, lease) == 3 })
	for i, c := range direct {
		pttl, err := c.PTTL(ctx, "lock:{validity}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Until(deadline); pttl < left {
			t.Errorf("server %d: key expires in %v, before the lease's deadline in %v", i, pttl, left)
		}
	}
}

// TestInvalidKey: keys that cannot carry a counter in their slot are refused.
func TestInvalidKey(t *testing.T) {
	l := New(nil, Options{})
	if _, err := l.TryLock(context.Background(), "x"); !errors.Is(err, ErrNoServers) {
		t.Errorf("TryLock with no servers = %v, want ErrNoServers", err)
	}
	for key, want := range map[string]string{"lock:{a}": "lock:{a}:redlock-fence", "a": "{a}:redlock-fence"} {
		if got, err := fenceKey(key); got != want || err != nil {
			t.Errorf("fenceKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, key := range []string{"", "a}"} {
		if _, err := fenceKey(key); !errors.Is(err, lock.ErrInvalidKey) {
			t.Errorf("fenceKey(%q) = %v, want lock.ErrInvalidKey", key, err)
		}
	}
}
