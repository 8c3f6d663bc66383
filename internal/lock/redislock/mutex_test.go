package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// acquireFunc takes the lock (or, for the control run, does nothing) and
// returns how to give it back.
type acquireFunc func(ctx context.Context, g int) (release func() error, err error)

// runOverlap has goroutines contend through the acquire funcs (one per
// "replica", goroutine g using acquires[g%len] and rdbs[g%len]) and counts
// how often one entered the critical section while another was inside it.
// The critical section also does an unguarded read-modify-write of a Redis
// counter, as a stock decrement would, so a broken lock also loses updates.
func runOverlap(t *testing.T, rdbs []*redis.Client, acquires []acquireFunc, goroutines, iters int) (overlaps, entries, lostUpdates int64) {
	t.Helper()
	ctx := context.Background()
	counter := fmt.Sprintf("overlap-counter-%d", time.Now().UnixNano())
	var inside atomic.Int32 // goroutines in the critical section: the "flag" counts, so no overlap hides another
	var nOverlap, nEntry atomic.Int64
	gate := make(chan struct{})
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-gate
			acquire := acquires[g%len(acquires)]
			for i := range iters {
				release, err := acquire(ctx, g)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d, iteration %d: acquire: %w", g, i, err)
					return
				}
				if inside.Add(1) != 1 {
					nOverlap.Add(1)
				}
				nEntry.Add(1)
				rdb := rdbs[g%len(rdbs)]
				n, err := rdb.Get(ctx, counter).Int64()
				if err != nil && err != redis.Nil {
					errs <- fmt.Errorf("goroutine %d: GET: %w", g, err)
					return
				}
				time.Sleep(100 * time.Microsecond) // the business work between read and write
				if err := rdb.Set(ctx, counter, n+1, 0).Err(); err != nil {
					errs <- fmt.Errorf("goroutine %d: SET: %w", g, err)
					return
				}
				inside.Add(-1)
				if err := release(); err != nil {
					errs <- fmt.Errorf("goroutine %d, iteration %d: release: %w", g, i, err)
					return
				}
			}
		})
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final, err := rdbs[0].Get(ctx, counter).Int64()
	if err != nil {
		t.Fatalf("GET %s: %v", counter, err)
	}
	return nOverlap.Load(), nEntry.Load(), nEntry.Load() - final
}

func mutexAcquire2(m *Mutex, key string) acquireFunc {
	return func(ctx context.Context, _ int) (func() error, error) {
		l, err := m.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(ctx) }, nil
	}
}

func reentrantAcquire2(r *Reentrant, key string) acquireFunc {
	return func(ctx context.Context, g int) (func() error, error) {
		ctx = lock.WithOwner(ctx, fmt.Sprintf("goroutine-%d", g))
		l, err := r.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(ctx) }, nil
	}
}

// TestLockWaitsWithoutSpinning: a waiter gets the lock soon after the holder
// releases it, in a bounded number of tries: a notified one tries about
// twice before parking and once when woken; a PollOnly one polls with
// backoff, some tries but no spinning.
func TestLockWaitsWithoutSpinning(t *testing.T) {
	url := sharedRedis(t)
	tests := []struct {
		name               string
		opts               Options
		minTrips, maxTrips int
	}{
		{"notified", Options{}, 2, 4},
		{"PollOnly", Options{PollOnly: true}, 5, 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			check := client(t, url)
			holder := closing(t, NewMutex(check, Options{}))
			tt.opts.Observer = rec
			var tries atomic.Int64
			waiter := closing(t, NewMutex(client(t, url, acquireCounter(&tries)), tt.opts))
			ctx := context.Background()
			key := "lock:{wait-" + tt.name + "}"
			held, err := holder.Lock(ctx, key)
			if err != nil {
				t.Fatalf("holder Lock(%q) = %v", key, err)
			}
			wait := lockAsync(ctx, func(ctx context.Context, _, key string) (lock.Lease, error) { return waiter.Lock(ctx, key) }, "", key)
			// The holder releases once the waiter is seen waiting: its first
			// tries made and, when notified, parked on the release channel.
			testenv.WaitFor(t, fmt.Sprintf("the waiter's first %d tries", tt.minTrips), 10*time.Second, func() bool { return tries.Load() >= int64(tt.minTrips) })
			if !tt.opts.PollOnly {
				subscribed(t, check, key)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatalf("holder Release = %v", err)
			}
			l, _, err := wait()
			if err != nil {
				t.Fatalf("waiter Lock(%q) = %v, want it to wait for the release", key, err)
			}
			defer l.Release(ctx)
			// Acquired after the release, in a bounded number of tries:
			// how soon is the machine's business, not the lock's.
			if trips := rec.acquired[0].trips; trips < tt.minTrips || trips > tt.maxTrips {
				t.Errorf("waiting made %d round trips, want %d to %d", trips, tt.minTrips, tt.maxTrips)
			}
		})
	}
}

// TestTimeoutAndCancel: giving up reports lock.ErrTimeout wrapping the context's
// error, not before the budget, and leaves the holder's key alone.
func TestTimeoutAndCancel(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	const mkey, rkey = "lock:{timeout-m}", "lock:{timeout-r}"
	bg := context.Background()
	mheld, err := NewMutex(rdb, Options{}).Lock(bg, mkey)
	if err != nil {
		t.Fatalf("holder Mutex.Lock = %v", err)
	}
	defer mheld.Release(bg)
	rheld, err := NewReentrant(rdb, Options{}).Lock(lock.WithOwner(bg, "holder"), rkey)
	if err != nil {
		t.Fatalf("holder Reentrant.Lock = %v", err)
	}
	defer rheld.Release(bg)

	short := NewMutex(rdb, Options{Options: lock.Options{Wait: 150 * time.Millisecond}})
	long := NewMutex(rdb, Options{Watchdog: true}) // a timed-out waiter must leave no renewing goroutine
	re := NewReentrant(rdb, Options{Options: lock.Options{Wait: 150 * time.Millisecond}})
	cancelSoon := func() (context.Context, func()) {
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(150*time.Millisecond, cancel)
		return ctx, cancel
	}
	deadline := func() (context.Context, func()) { return context.WithTimeout(bg, 150*time.Millisecond) }
	none := func() (context.Context, func()) { return bg, func() {} }
	tests := []struct {
		name string
		key  string
		held lock.Lease
		ctx  func() (context.Context, func())
		lock func(ctx context.Context, key string) (lock.Lease, error)
		want error
	}{
		{"Mutex Wait budget", mkey, mheld, none, short.Lock, context.DeadlineExceeded},
		{"Mutex ctx deadline", mkey, mheld, deadline, long.Lock, context.DeadlineExceeded},
		{"Mutex ctx cancelled", mkey, mheld, cancelSoon, long.Lock, context.Canceled},
		{"Reentrant Wait budget", rkey, rheld, none, func(ctx context.Context, key string) (lock.Lease, error) {
			return re.Lock(lock.WithOwner(ctx, "waiter"), key)
		}, context.DeadlineExceeded},
		{"Reentrant ctx cancelled", rkey, rheld, cancelSoon, func(ctx context.Context, key string) (lock.Lease, error) {
			return NewReentrant(rdb, Options{}).Lock(lock.WithOwner(ctx, "waiter"), key)
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			key := tt.key
			l, err := tt.lock(ctx, key)
			took := time.Since(start)
			if l != nil || !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, tt.want) {
				t.Fatalf("Lock(%q) = %v, %v; want lock.ErrTimeout wrapping %v", key, l, err, tt.want)
			}
			var le *lock.Error
			if !errors.As(err, &le) || le.Key != key || le.Op != "lock" {
				t.Errorf("Lock(%q) error %#v, want *lock.Error with Op lock and the key", key, err)
			}
			if took < 140*time.Millisecond {
				t.Errorf("Lock(%q) gave up after %v, before its 150ms budget", key, took)
			}
			if err := tt.held.Err(); err != nil {
				t.Errorf("holder's lease after a waiter gave up: Err() = %v, want nil", err)
			}
		})
	}
	// An already-cancelled context does not touch Redis.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := long.Lock(ctx, "lock:{never}"); !errors.Is(err, context.Canceled) {
		t.Errorf("Lock with a cancelled ctx = %v, want lock.ErrTimeout wrapping context.Canceled", err)
	}
	if n := rdb.Exists(bg, "lock:{never}").Val(); n != 0 {
		t.Errorf("Lock with a cancelled ctx created the key (EXISTS = %d)", n)
	}
}

// TestLostReplyLeavesNoOrphan: the acquire script runs but its reply is lost
// (as on a dropped connection): Lock fails and deletes the key it may have
// set instead of leaving it held until its TTL.
func TestLostReplyLeavesNoOrphan(t *testing.T) {
	url := sharedRedis(t)
	bg := context.Background()
	var drop atomic.Bool
	drop.Store(true)
	lossy := client(t, url, evalHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		// Only the first command that ran: the acquire (a NOSCRIPT reply
		// passes, so that the script really runs when sent again).
		if err == nil && drop.CompareAndSwap(true, false) {
			cmd.SetErr(context.DeadlineExceeded)
			return context.DeadlineExceeded
		}
		return err
	}))
	check := client(t, url)
	tests := []struct {
		name string
		lock func(ctx context.Context, key string) (lock.Lease, error)
	}{
		{"Mutex", NewMutex(lossy, Options{Watchdog: true}).Lock},
		{"Reentrant", func(ctx context.Context, key string) (lock.Lease, error) {
			return NewReentrant(lossy, Options{}).Lock(lock.WithOwner(ctx, "o"), key)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drop.Store(true)
			key := "lock:{lost-reply-" + tt.name + "}"
			l, err := tt.lock(bg, key)
			if l != nil || err == nil {
				t.Fatalf("Lock(%q) with its reply lost = %v, %v; want an error", key, l, err)
			}
			if n := check.Exists(bg, key).Val(); n != 0 {
				t.Errorf("after a lost acquire reply the key is still there (EXISTS = %d, PTTL = %v): orphan", n, check.PTTL(bg, key).Val())
			}
		})
	}
}

// TestResentScriptsAreIdempotent: every script sent twice (as go-redis does
// when it retries after a lost reply) mints one fence, counts one re-entry
// and releases once, reporting success.
func TestResentScriptsAreIdempotent(t *testing.T) {
	url := sharedRedis(t)
	bg := context.Background()
	twice := client(t, url, evalHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if err := next(ctx, cmd); err != nil {
			return err
		}
		return next(ctx, cmd)
	}))
	check := client(t, url)

	m := NewMutex(twice, Options{})
	const mkey = "lock:{twice-m}"
	l, err := m.Lock(bg, mkey)
	if err != nil {
		t.Fatalf("Mutex.Lock(%q) with scripts sent twice = %v, want success", mkey, err)
	}
	if n := check.HGet(bg, mkey+":fence", "n").Val(); n != fmt.Sprint(l.Fence().Token) {
		t.Errorf("fence counter after one acquire sent twice = %s, lease fence %d: minted twice", n, l.Fence().Token)
	}
	if err := l.Release(bg); err != nil {
		t.Errorf("Mutex Release sent twice = %v, want nil", err)
	}

	r := NewReentrant(twice, Options{})
	const rkey = "lock:{twice-r}"
	ctx := lock.WithOwner(bg, "o")
	var leases []lock.Lease
	for i := range 3 {
		l, err := r.Lock(ctx, rkey)
		if err != nil {
			t.Fatalf("Reentrant.Lock #%d with scripts sent twice = %v", i+1, err)
		}
		leases = append(leases, l)
	}
	if c := check.HGet(bg, rkey, "o").Val(); c != "3" {
		t.Errorf("hold count after 3 Locks sent twice each = %s, want 3", c)
	}
	for i := range 2 {
		if err := leases[2-i].Release(ctx); err != nil {
			t.Errorf("Reentrant Release #%d sent twice = %v", i+1, err)
		}
	}
	if c := check.HGet(bg, rkey, "o").Val(); c != "1" {
		t.Errorf("hold count after 3 Locks and 2 Releases, each sent twice = %s, want 1", c)
	}
	if err := leases[0].Release(ctx); err != nil {
		t.Errorf("last Reentrant Release sent twice = %v, want nil", err)
	}
	if n := check.Exists(bg, rkey).Val(); n != 0 {
		t.Errorf("after the last release the hold is still there")
	}
}

// TestLeaseContext: the lease context is derived from the caller's (its
// cancellation ends the context but not the hold) and ends with
// lock.ErrReleased on Release.
func TestLeaseContext(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	m := NewMutex(rdb, Options{Watchdog: true})
	type ctxKey struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	l, err := m.Lock(parent, "lock:{ctx}")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	if l.Key() != "lock:{ctx}" || l.Context().Value(ctxKey{}) != "v" {
		t.Errorf("lease Key() = %q, Context value = %v; want the key and the caller's values", l.Key(), l.Context().Value(ctxKey{}))
	}
	cancel()
	if l.Context().Err() == nil {
		t.Errorf("caller's context cancelled, lease context still live")
	}
	if err := l.Err(); err != nil {
		t.Errorf("caller's context cancelled: lease Err() = %v, want nil (the lock is still held)", err)
	}
	if n := rdb.Exists(context.Background(), "lock:{ctx}").Val(); n != 1 {
		t.Errorf("caller's context cancelled: EXISTS = %d, want the lock still held", n)
	}
	// Release under the cancelled context still frees the key.
	if err := l.Release(parent); err != nil {
		t.Errorf("Release(cancelled ctx) = %v, want nil", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, context.Canceled) {
		t.Errorf("cause = %v, want the caller's cancellation (it came first)", cause)
	}
	if err := l.Err(); !errors.Is(err, lock.ErrReleased) {
		t.Errorf("Err() after Release = %v, want lock.ErrReleased", err)
	}
	if n := rdb.Exists(context.Background(), "lock:{ctx}").Val(); n != 0 {
		t.Errorf("after Release(cancelled ctx): EXISTS = %d, want 0", n)
	}

	l2, err := m.Lock(context.Background(), "lock:{ctx}")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	if err := l2.Release(context.Background()); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if cause := context.Cause(l2.Context()); !errors.Is(cause, lock.ErrReleased) {
		t.Errorf("lease context cause after Release = %v, want lock.ErrReleased", cause)
	}
}

// TestCleanupAfterLostReplyWithinBudget: the acquire script runs but its
// reply is lost, and the release that cleans up after it hangs (a Redis
// that stopped answering): Lock still answers within its budget, and the
// cleanup goes on in the background (Close waits for it), deleting the
// key once Redis answers again.
func TestCleanupAfterLostReplyWithinBudget(t *testing.T) {
	url := sharedRedis(t)
	bg := context.Background()
	check := client(t, url)
	var drop atomic.Bool
	unblock := make(chan struct{})
	releases := map[string]bool{}
	for _, s := range []*redis.Script{mutexRelease, reentrantRelease, fairRelease} {
		releases[s.Hash()] = true
	}
	// Loaded, so that every script goes by EVALSHA (which the hook tells
	// apart) and no NOSCRIPT reply takes the place of the acquire's.
	for _, s := range []*redis.Script{mutexAcquire, reentrantAcquire, fairAcquire, mutexRelease, reentrantRelease, fairRelease} {
		if err := s.Load(bg, check).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lossy := client(t, url, evalHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if a := cmd.Args(); len(a) > 1 && releases[fmt.Sprint(a[1])] {
			select { // a Redis that answers no more, until unblock
			case <-unblock:
			case <-ctx.Done():
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		if err == nil && drop.CompareAndSwap(true, false) { // the acquire: ran, reply lost
			cmd.SetErr(context.DeadlineExceeded)
			return context.DeadlineExceeded
		}
		return err
	}))
	const wait = 500 * time.Millisecond
	opts := Options{Options: lock.Options{Wait: wait}}
	m, r, f := NewMutex(lossy, opts), NewReentrant(lossy, opts), NewFair(lossy, opts)
	tests := []struct {
		name  string
		lock  func(ctx context.Context, key string) (lock.Lease, error)
		close func()
		left  func(key string) int64 // the keys of the lock still in Redis
	}{
		{"Mutex", m.Lock, m.Close, func(key string) int64 { return check.Exists(bg, key).Val() }},
		{"Reentrant", func(ctx context.Context, key string) (lock.Lease, error) {
			return r.Lock(lock.WithOwner(ctx, "o"), key)
		}, r.Close, func(key string) int64 { return check.Exists(bg, key).Val() }},
		{"Fair", f.Lock, f.Close, func(key string) int64 { return check.Exists(bg, fairKeysT(t, key).keys[:3]...).Val() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "lock:{cleanup-budget-" + tt.name + "}"
			drop.Store(true)
			start := time.Now()
			l, err := tt.lock(bg, key)
			took := time.Since(start)
			if l != nil || err == nil {
				t.Fatalf("Lock(%q) with its reply lost = %v, %v; want an error", key, l, err)
			}
			if took > wait {
				t.Errorf("Lock(%q) answered after %v, want within its %v budget: it waited for the hung cleanup", key, took, wait)
			} else {
				t.Logf("Lock(%q) answered after %v (budget %v)", key, took, wait)
			}
			if n := tt.left(key); n == 0 {
				t.Fatalf("the acquire that lost its reply left no key: nothing to clean up, the test proves nothing")
			}
		})
	}
	close(unblock)
	for _, tt := range tests {
		tt.close() // waits for the cleanups
		if n := tt.left("lock:{cleanup-budget-" + tt.name + "}"); n != 0 {
			t.Errorf("%s: %d keys left after Close, want the cleanup to have deleted them", tt.name, n)
		}
	}
}
