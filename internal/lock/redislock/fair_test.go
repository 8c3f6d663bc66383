package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
	"inventory/internal/testenv"
)

// fairKeysT is fairKeysFor for a test.
func fairKeysT(t *testing.T, key string) fairKeys {
	t.Helper()
	k, err := fairKeysFor(key)
	if err != nil {
		t.Fatalf("fairKeysFor(%q) = %v", key, err)
	}
	return k
}

// queued waits until key's queue holds n waiters.
func queued(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	q := fairKeysT(t, key).keys[1]
	testenv.WaitFor(t, fmt.Sprintf("%d waiters in %s", n, q), 5*time.Second, func() bool {
		return rdb.ZCard(context.Background(), q).Val() == n
	})
}

// noLeftovers checks that nothing of key's lock but its fencing counter is
// left in Redis: no holder, no queue, no waiter lease.
func noLeftovers(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	k := fairKeysT(t, key)
	if n := rdb.Exists(context.Background(), k.keys[:3]...).Val(); n != 0 {
		q := rdb.ZRangeWithScores(context.Background(), k.keys[1], 0, -1).Val()
		t.Errorf("%d of %v left in Redis (queue %v), want none", n, k.keys[:3], q)
	}
}

func fairLock(f *Fair) func(context.Context, string, string) (lock.Lease, error) {
	return func(ctx context.Context, _, key string) (lock.Lease, error) { return f.Lock(ctx, key) }
}

// TestFairOverlap: goroutines over two clients ("replicas") contend for one
// key: never two inside at once, no lost update, fences strictly
// increasing in the order of the holds, and nothing left in Redis after.
func TestFairOverlap(t *testing.T) {
	url := sharedRedis(t)
	c1, c2 := client(t, url), client(t, url)
	const key = "lock:{fair-overlap}"
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 30 * time.Second}}
	var mu sync.Mutex
	var last int64
	var backwards int
	acquire := func(f *Fair) acquireFunc {
		return func(ctx context.Context, _ int) (func() error, error) {
			l, err := f.Lock(ctx, key)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			if l.Fence().Token <= last {
				backwards++
			}
			last = l.Fence().Token
			mu.Unlock()
			return func() error { return l.Release(ctx) }, nil
		}
	}
	f1, f2 := closing(t, NewFair(c1, opts)), closing(t, NewFair(c2, opts))
	const goroutines, iters = 16, 15
	overlaps, entries, lostUpdates := runOverlap(t, []*redis.Client{c1, c2}, []acquireFunc{acquire(f1), acquire(f2)}, goroutines, iters)
	if overlaps != 0 || lostUpdates != 0 || entries != goroutines*iters {
		t.Errorf("Fair: %d overlaps, %d lost updates in %d entries, want 0, 0 in %d", overlaps, lostUpdates, entries, goroutines*iters)
	}
	if backwards != 0 {
		t.Errorf("fence did not increase %d times in %d holds", backwards, entries)
	}
	noLeftovers(t, c1, key)
}

// TestFairFIFO: waiters that queued one after another (each seen in the
// queue before the next starts), from two clients, acquire in exactly that
// order, each woken by its notice (their timed re-checks are a minute
// away); the holder, locking again right after its release, comes last.
func TestFairFIFO(t *testing.T) {
	url := sharedRedis(t)
	check := client(t, url)
	ctx := context.Background()
	const key, n = "lock:{fair-fifo}", 8
	opts := Options{Options: lock.Options{Wait: 50 * time.Second}, PollInterval: time.Minute}
	fs := []*Fair{closing(t, NewFair(client(t, url), opts)), closing(t, NewFair(client(t, url), opts))}
	held, err := fs[0].Lock(ctx, key)
	if err != nil {
		t.Fatalf("holder Lock = %v", err)
	}
	order := make(chan int, n+1) // sent while holding the lock, so in the order of the holds
	errs := make(chan error, n+1)
	var wg sync.WaitGroup
	var taken atomic.Int64
	take := func(i int, f *Fair) {
		l, err := f.Lock(ctx, key)
		if err != nil {
			errs <- fmt.Errorf("waiter %d: Lock = %w", i, err)
			return
		}
		taken.Add(1)
		order <- i
		if err := l.Release(ctx); err != nil {
			errs <- fmt.Errorf("waiter %d: Release = %w", i, err)
		}
	}
	for i := range n {
		wg.Go(func() { take(i, fs[i%2]) })
		queued(t, check, key, int64(i+1))
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("holder Release = %v", err)
	}
	wg.Go(func() { take(n, fs[0]) }) // the releaser comes back at once
	// Only notices can hand the lock over before the first timed re-check,
	// a minute after each waiter queued.
	testenv.WaitFor(t, "every hand-over, each woken by its notice", 40*time.Second, func() bool { return taken.Load() == n+1 })
	wg.Wait()
	close(order)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var got []int
	for i := range order {
		got = append(got, i)
	}
	want := make([]int, n+1)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Errorf("acquisition order = %v, want %v (the order they queued in, the re-locking holder last)", got, want)
	}
	noLeftovers(t, check, key)
}

// TestFairGiveUp: a waiter whose Wait budget ends and one whose ctx is
// cancelled get lock.ErrTimeout wrapping the context's error and leave the
// queue; the one behind them gets the lock as soon as it is released;
// nothing is left in Redis.
func TestFairGiveUp(t *testing.T) {
	url := sharedRedis(t)
	check := client(t, url)
	bg := context.Background()
	const key = "lock:{fair-giveup}"
	rec := &recorder{}
	const budget = 300 * time.Millisecond
	short := closing(t, NewFair(client(t, url), Options{Options: lock.Options{Wait: budget, Observer: rec}, PollInterval: time.Minute}))
	long := closing(t, NewFair(client(t, url), Options{Options: lock.Options{Wait: 30 * time.Second}, PollInterval: time.Minute}))
	held, err := long.Lock(bg, key)
	if err != nil {
		t.Fatalf("holder Lock = %v", err)
	}
	timedOut := lockAsync(bg, fairLock(short), "", key)
	queued(t, check, key, 1)
	cctx, cancel := context.WithCancel(bg)
	cancelled := lockAsync(cctx, fairLock(long), "", key)
	queued(t, check, key, 2)
	next := lockAsync(bg, fairLock(long), "", key)
	queued(t, check, key, 3)

	cancel()
	if _, _, err := cancelled(); !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock with ctx cancelled = %v, want lock.ErrTimeout wrapping context.Canceled", err)
	}
	if _, _, err := timedOut(); !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock past Wait = %v, want lock.ErrTimeout wrapping context.DeadlineExceeded", err)
	}
	// A waiter whose budget ended answers at once and leaves the queue in
	// the background (within cleanupTimeout), not after its budget.
	queued(t, check, key, 1)
	rec.mu.Lock()
	if len(rec.acquired) != 1 || !errors.Is(rec.acquired[0].err, lock.ErrTimeout) || rec.acquired[0].wait < budget {
		t.Errorf("Observer.Acquired = %+v, want one lock.ErrTimeout after at least %v", rec.acquired, budget)
	}
	rec.mu.Unlock()

	released := time.Now()
	if err := held.Release(bg); err != nil {
		t.Fatalf("holder Release = %v", err)
	}
	l, at, err := next()
	if err != nil {
		t.Fatalf("last waiter Lock = %v, want the lock", err)
	}
	if late := at.Sub(released); late > 500*time.Millisecond {
		t.Errorf("last waiter acquired %v after the release, want well within 500ms (its re-check is a minute away)", late)
	}
	if err := l.Release(bg); err != nil {
		t.Errorf("Release = %v", err)
	}
	noLeftovers(t, check, key)
}

// TestFairDeadWaiterIsDropped: a waiter that queued and then died (it never
// refreshes its entry nor leaves) holds up the queue only until its lease
// on Redis' clock has run out; then the one behind it gets the lock.
func TestFairDeadWaiterIsDropped(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{fair-dead}"
	const poll = 100 * time.Millisecond
	opts := Options{Options: lock.Options{Wait: 10 * time.Second}, PollInterval: poll}
	lease := opts.withDefaults().waiterLease()
	f := closing(t, NewFair(rdb, opts))
	held, err := f.Lock(bg, key)
	if err != nil {
		t.Fatalf("holder Lock = %v", err)
	}
	// What a Lock's first try leaves behind when its process is then killed.
	k := fairKeysT(t, key)
	const dead = "DEAD-WAITER-TOKEN-XXXXXXXX"
	enqueued := time.Now()
	if _, _, err := redisscript.Run(bg, rdb, fairAcquire, k.keys, dead, 30000, "0", ms(lease), k.channel); err != nil {
		t.Fatalf("enqueue the dead waiter: %v", err)
	}
	next := lockAsync(bg, fairLock(f), "", key)
	queued(t, rdb, key, 2)
	if err := held.Release(bg); err != nil { // its notice goes to the dead waiter
		t.Fatalf("holder Release = %v", err)
	}
	l, at, err := next()
	if err != nil {
		t.Fatalf("waiter behind a dead one: Lock = %v, want the lock", err)
	}
	defer l.Release(bg)
	waited := at.Sub(enqueued)
	if waited < lease-10*time.Millisecond || waited > lease+3*poll+200*time.Millisecond {
		t.Errorf("waiter behind a dead one acquired %v after it queued, want just after its lease of %v", waited, lease)
	}
	if err := rdb.ZScore(bg, k.keys[1], dead).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("ZSCORE of the dead waiter = %v, want it dropped", err)
	}
}

// TestFairTryLock: TryLock takes a free lock only when nobody queues for
// it, and never queues.
func TestFairTryLock(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{fair-try}"
	f := closing(t, NewFair(rdb, Options{PollInterval: time.Minute}))
	l, err := f.TryLock(bg, key)
	if err != nil {
		t.Fatalf("TryLock of a free lock = %v", err)
	}
	if _, err := f.TryLock(bg, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock of a held lock = %v, want lock.ErrNotAcquired", err)
	}
	if n := rdb.Exists(bg, fairKeysT(t, key).keys[1]).Val(); n != 0 {
		t.Errorf("a failed TryLock left a queue; want it never to queue")
	}
	// A waiter queues; once the lock is released it is the waiter's.
	next := lockAsync(bg, fairLock(f), "", key)
	queued(t, rdb, key, 1)
	k := fairKeysT(t, key)
	if err := rdb.Set(bg, k.keys[0], "x", 0).Err(); err != nil { // hold off the waiter's turn
		t.Fatal(err)
	}
	if err := l.Release(bg); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after the key was overwritten = %v, want lock.ErrNotHeld", err)
	}
	if err := rdb.Del(bg, k.keys[0]).Err(); err != nil { // free, and no notice: the waiter has not been told
		t.Fatal(err)
	}
	if _, err := f.TryLock(bg, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock of a free lock with a waiter queued = %v, want lock.ErrNotAcquired (no barging)", err)
	}
	// The TryLock reminded the waiter of its turn.
	l2, _, err := next()
	if err != nil {
		t.Fatalf("waiter Lock = %v", err)
	}
	if err := l2.Release(bg); err != nil {
		t.Errorf("Release = %v", err)
	}
	noLeftovers(t, rdb, key)
}

// TestFairReleaseTwice: a second Release says lock.ErrNotHeld and touches
// nothing; the release script run with a stranger's token neither frees
// the lock nor reports success.
func TestFairReleaseTwice(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{fair-twice}"
	f := closing(t, NewFair(rdb, Options{}))
	l, err := f.Lock(bg, key)
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	if err := l.Release(bg); err != nil {
		t.Fatalf("Release = %v", err)
	}
	l2, err := f.Lock(bg, key)
	if err != nil {
		t.Fatalf("second Lock = %v", err)
	}
	if err := l.Release(bg); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release of the first lease = %v, want lock.ErrNotHeld", err)
	}
	k := fairKeysT(t, key)
	if v, _, err := redisscript.Run(bg, rdb, fairRelease, k.keys, "STRANGER-TOKEN-XXXXXXXXXXX", k.channel); err != nil || v != int64(0) {
		t.Errorf("release by a stranger = %v, %v, want 0", v, err)
	}
	if err := l2.Err(); err != nil {
		t.Errorf("second lease after the stray releases: Err = %v, want held", err)
	}
	if _, err := f.TryLock(bg, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock while the second lease holds = %v, want lock.ErrNotAcquired", err)
	}
	if err := l2.Release(bg); err != nil {
		t.Errorf("Release of the second lease = %v", err)
	}
	noLeftovers(t, rdb, key)
}

// TestFairFencing: tokens rise from FenceFloor, which is asked only when
// the counter is missing; the counter is the Fair lock's own (a Mutex of
// the same key counts apart) and has no TTL.
func TestFairFencing(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{fair-fence}"
	floorCalls, floor := 0, int64(1000)
	opts := Options{FenceFloor: func(context.Context, string) (int64, error) { floorCalls++; return floor, nil }}
	f := closing(t, NewFair(rdb, opts))
	last := int64(-1)
	for i := range 5 {
		l, err := f.Lock(bg, key)
		if err != nil {
			t.Fatalf("Lock #%d = %v", i+1, err)
		}
		if l.Fence().Token <= last || l.Fence().Token <= floor {
			t.Errorf("Lock #%d fence = %d, previous %d, floor %d: want strictly increasing above the floor", i+1, l.Fence().Token, last, floor)
		}
		last = l.Fence().Token
		if err := l.Release(bg); err != nil {
			t.Fatalf("Release #%d = %v", i+1, err)
		}
	}
	if floorCalls != 1 {
		t.Errorf("FenceFloor called %d times in 5 acquisitions, want once", floorCalls)
	}
	m, err := NewMutex(rdb, Options{}).Lock(bg, key)
	if err != nil {
		t.Fatalf("Mutex Lock of the same key = %v (a Fair lock and a Mutex do not exclude each other)", err)
	}
	if m.Fence().Token != 1 {
		t.Errorf("Mutex fence = %d, want 1: its own counter", m.Fence().Token)
	}
	_ = m.Release(bg)
	if pttl := rdb.PTTL(bg, fairKeysT(t, key).keys[3]).Val(); pttl != -1 {
		t.Errorf("PTTL of the fence counter = %v, want none (-1)", pttl)
	}
	if err := rdb.FlushAll(bg).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	floor = 5000
	l, err := f.Lock(bg, key)
	if err != nil {
		t.Fatalf("Lock after FLUSHALL = %v", err)
	}
	if l.Fence().Token <= floor || floorCalls != 2 {
		t.Errorf("after FLUSHALL with floor %d: fence %d, FenceFloor calls %d, want above the floor, 2 calls", floor, l.Fence().Token, floorCalls)
	}
	if err := l.Release(bg); err != nil {
		t.Errorf("Release = %v", err)
	}
}

// TestFairLeaseLost: the holder key deleted behind the lock's back (no
// release, so no notice): with a watchdog the holder's context is
// cancelled within TTL/3 or so, and the waiter next in line notices the
// free lock by its timed re-check.
func TestFairLeaseLost(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{fair-lost}"
	const ttl, poll = 600 * time.Millisecond, 200 * time.Millisecond
	f := closing(t, NewFair(rdb, Options{Options: lock.Options{TTL: ttl}, Watchdog: true, PollInterval: poll}))
	held, err := f.Lock(bg, key)
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	next := lockAsync(bg, fairLock(f), "", key)
	queued(t, rdb, key, 1)
	deleted := time.Now()
	if err := rdb.Del(bg, fairKeysT(t, key).keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if d, done := waitDone(held.Context(), 2*time.Second); !done || d > ttl/3+200*time.Millisecond {
		t.Fatalf("lease context after its key was deleted: cancelled %v after %v, want within TTL/3 (%v)", done, d, ttl/3)
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, lock.ErrLost) || !errors.Is(cause, lock.ErrNotHeld) {
		t.Errorf("cause = %v, want lock.ErrLost and lock.ErrNotHeld", cause)
	}
	l, at, err := next()
	if err != nil {
		t.Fatalf("waiter Lock = %v", err)
	}
	if late := at.Sub(deleted); late > poll+200*time.Millisecond {
		t.Errorf("waiter acquired %v after the key was deleted, want within its re-check (%v)", late, poll)
	}
	if err := held.Release(bg); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Release of the lost lease = %v, want lock.ErrLost", err)
	}
	if err := l.Release(bg); err != nil {
		t.Errorf("waiter Release = %v", err)
	}
	noLeftovers(t, rdb, key)
}

// TestFairRedisRestart: Redis restarts empty while the lock is held and
// four waiters queue behind it: the holder's lease is cancelled, every
// waiter still gets the lock (none hangs), and fences keep rising above
// every fence handed out before (FenceFloor plays the storage that saw them).
func TestFairRedisRestart(t *testing.T) {
	leakCheck(t)
	srv := testenv.RedisServer(t)
	check := client(t, srv.URL)
	bg := context.Background()
	const key, n = "lock:{fair-restart}", 4
	var mu sync.Mutex
	var seen int64
	var fences []int64
	sawFence := func(f int64) {
		mu.Lock()
		defer mu.Unlock()
		fences = append(fences, f)
		seen = max(seen, f)
	}
	opts := Options{
		Options:      lock.Options{TTL: 600 * time.Millisecond, Wait: 20 * time.Second},
		Watchdog:     true,
		PollInterval: 200 * time.Millisecond,
		FenceFloor:   func(context.Context, string) (int64, error) { mu.Lock(); defer mu.Unlock(); return seen, nil },
	}
	fs := []*Fair{closing(t, NewFair(client(t, srv.URL), opts)), closing(t, NewFair(client(t, srv.URL), opts))}
	// A few holds first, so the counter is well above 1.
	for range 3 {
		l, err := fs[0].Lock(bg, key)
		if err != nil {
			t.Fatalf("Lock = %v", err)
		}
		sawFence(l.Fence().Token)
		_ = l.Release(bg)
	}
	held, err := fs[0].Lock(bg, key)
	if err != nil {
		t.Fatalf("holder Lock = %v", err)
	}
	sawFence(held.Fence().Token)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := fs[i%2].Lock(bg, key)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: Lock = %w", i, err)
				return
			}
			sawFence(l.Fence().Token)
			_ = l.Release(bg)
		})
		queued(t, check, key, int64(i+1))
	}
	if err := srv.Restart(bg); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
	if _, done := waitDone(held.Context(), 3*time.Second); !done {
		t.Fatalf("3s after a Redis restart the holder's lease context is still live")
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("10s after a Redis restart not every waiter has had the lock")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := held.Release(bg); !errors.Is(err, lock.ErrLost) {
		t.Errorf("holder Release after the restart = %v, want lock.ErrLost", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences in the order of the holds = %v: want strictly increasing across the restart", fences)
			break
		}
	}
	noLeftovers(t, check, key)
}

// BenchmarkLockRelease measures Lock+Release on one key for the Mutex and
// the Fair lock in the same run: uncontended (1 goroutine), and 32
// goroutines over two clients with an empty critical section and with 1ms
// of work in it. The max wait next to the p99 is the fairness figure: a
// FIFO queue keeps the longest wait near the p99; the Mutex lets a waiter
// lose the race again and again.
func BenchmarkLockRelease(b *testing.B) {
	url := testenv.RedisURL(b)
	lockers := []benchLocker{benchLockers[0], {"Fair", func(b *testing.B, rdb redis.UniversalClient, opts Options) func(context.Context, int, string) (lock.Lease, error) {
		f := NewFair(rdb, opts)
		b.Cleanup(f.Close)
		return func(ctx context.Context, _ int, key string) (lock.Lease, error) { return f.Lock(ctx, key) }
	}}}
	cases := []struct {
		goroutines int
		work       time.Duration
	}{{1, 0}, {32, 0}, {32, time.Millisecond}}
	for _, c := range cases {
		for _, bl := range lockers {
			b.Run(fmt.Sprintf("goroutines=%d/work=%v/%s", c.goroutines, c.work, bl.name), func(b *testing.B) {
				benchLock(b, url, bl, Options{Options: lock.Options{Wait: time.Minute}}, c.goroutines, c.work, fmt.Sprintf("lock:{bench-lr-%s-%d-%v}", bl.name, c.goroutines, c.work))
			})
		}
	}
}
