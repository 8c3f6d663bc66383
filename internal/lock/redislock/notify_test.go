package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/localstack/netproxy"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// closing closes l when the test ends (before the clients it uses are closed
// and the leak check runs, as cleanups run last-registered first).
func closing[L interface{ Close() }](t *testing.T, l L) L {
	t.Helper()
	t.Cleanup(l.Close)
	return l
}

// subscribed waits until some client listens on key's release channel: a
// waiter has joined and its notifier has subscribed.
func subscribed(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	ch, err := releaseChannel(key)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "a subscriber on "+ch, 5*time.Second, func() bool {
		return rdb.PubSubNumSub(context.Background(), ch).Val()[ch] > 0
	})
}

// lockers builds a Mutex or a Reentrant with opts over rdb and returns its
// Lock for one owner, closing it at the end of the test.
var lockers = []struct {
	name string
	new  func(t *testing.T, rdb *redis.Client, opts Options) func(ctx context.Context, owner, key string) (lock.Lease, error)
}{
	{"Mutex", func(t *testing.T, rdb *redis.Client, opts Options) func(context.Context, string, string) (lock.Lease, error) {
		m := closing(t, NewMutex(rdb, opts))
		return func(ctx context.Context, _, key string) (lock.Lease, error) { return m.Lock(ctx, key) }
	}},
	{"Reentrant", func(t *testing.T, rdb *redis.Client, opts Options) func(context.Context, string, string) (lock.Lease, error) {
		r := closing(t, NewReentrant(rdb, opts))
		return func(ctx context.Context, owner, key string) (lock.Lease, error) {
			return r.Lock(lock.WithOwner(ctx, owner), key)
		}
	}},
}

// lockAsync runs lock in a goroutine; the returned func waits for its result.
func lockAsync(ctx context.Context, lk func(context.Context, string, string) (lock.Lease, error), owner, key string) func() (lock.Lease, time.Time, error) {
	type result struct {
		l   lock.Lease
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := lk(ctx, owner, key)
		done <- result{l, time.Now(), err}
	}()
	return func() (lock.Lease, time.Time, error) { r := <-done; return r.l, r.at, r.err }
}

// TestReleaseWakesWaiter: with timed retries a minute apart, a parked
// waiter still acquires right after the release, for either kind of lock
// and either kind of holder: only the release's notice can have woken it.
func TestReleaseWakesWaiter(t *testing.T) {
	url := sharedRedis(t)
	check := client(t, url)
	ctx := context.Background()
	for _, holder := range lockers {
		for _, waiter := range lockers {
			t.Run(holder.name+" held, "+waiter.name+" waits", func(t *testing.T) {
				hold := holder.new(t, client(t, url), Options{})
				wait := waiter.new(t, client(t, url), Options{PollInterval: time.Minute})
				key := fmt.Sprintf("lock:{wake-%s-%s}", holder.name, waiter.name)
				held, err := hold(ctx, "holder", key)
				if err != nil {
					t.Fatalf("holder Lock(%q) = %v", key, err)
				}
				got := lockAsync(ctx, wait, "waiter", key)
				subscribed(t, check, key)
				released := time.Now()
				if err := held.Release(ctx); err != nil {
					t.Fatalf("holder Release = %v", err)
				}
				l, at, err := got()
				if err != nil {
					t.Fatalf("waiter Lock(%q) = %v, want it once released", key, err)
				}
				defer l.Release(ctx)
				if late := at.Sub(released); late > 500*time.Millisecond {
					t.Errorf("waiter acquired %v after the release, want well within 500ms (its timed retry is 30s–1min away)", late)
				}
			})
		}
	}
}

// acquireCounter counts the acquire scripts a client runs.
func acquireCounter(n *atomic.Int64) redis.Hook {
	shas := map[string]bool{mutexAcquire.Hash(): true, reentrantAcquire.Hash(): true}
	return evalHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if a := cmd.Args(); len(a) > 1 && (shas[fmt.Sprint(a[1])] || a[1] == mutexAcquireSrc || a[1] == reentrantAcquireSrc) {
			n.Add(1)
		}
		return next(ctx, cmd)
	})
}

// TestReleaseWakesOneWaiter: a release wakes one of the parked waiters of a
// process, not all of them: N waiters acquire one after the other with
// about three tries each (two before parking, one when woken), where a
// woken herd would need on the order of N²/2. Local turns (on by default)
// keep the parked waiters of a key to one per process; they are off here,
// so that N of them park on the notifier (TestOneContenderPerProcess is
// the default's).
func TestReleaseWakesOneWaiter(t *testing.T) {
	url := sharedRedis(t)
	check := client(t, url)
	ctx := context.Background()
	for _, lk := range lockers {
		t.Run(lk.name, func(t *testing.T) {
			const n = 8
			var tries atomic.Int64
			lock := lk.new(t, client(t, url, acquireCounter(&tries)), Options{Options: lock.Options{Wait: 50 * time.Second}, PollInterval: time.Minute, noTurns: true})
			key := "lock:{wake-one-" + lk.name + "}"
			held, err := lock(ctx, "holder", key)
			if err != nil {
				t.Fatalf("holder Lock(%q) = %v", key, err)
			}
			var wg sync.WaitGroup
			var acquired atomic.Int64
			for g := range n {
				wg.Go(func() {
					l, err := lock(ctx, fmt.Sprint("waiter-", g), key)
					if err != nil {
						t.Errorf("waiter %d: Lock(%q) = %v", g, key, err)
						return
					}
					acquired.Add(1)
					if err := l.Release(ctx); err != nil {
						t.Errorf("waiter %d: Release = %v", g, err)
					}
				})
			}
			subscribed(t, check, key)
			testenv.WaitFor(t, "every waiter's two tries", 5*time.Second, func() bool { return tries.Load() >= 1+2*n })
			if err := held.Release(ctx); err != nil {
				t.Fatalf("holder Release = %v", err)
			}
			// Only notices can pass the lock along before the first timed
			// retry, a minute after each waiter parked.
			testenv.WaitFor(t, "every waiter to acquire, each woken by a notice", 40*time.Second, func() bool { return acquired.Load() == n })
			wg.Wait()
			if got, limit := tries.Load(), int64(1+3*n+2); got > limit {
				t.Errorf("%d waiters made %d acquire tries in all, want at most %d: a release woke more than one", n, got, limit)
			}
			t.Logf("%d waiters: %d acquire tries", acquired.Load(), tries.Load())
		})
	}
}

// TestLostNoticeFallsBackToPolling: when no notice comes — the key expired
// or was deleted without a release, or the subscriber's connection was
// killed around the release — the waiter still acquires, by its timed
// retry (bounded by the holder's remaining TTL) or the re-subscription
// after the reconnect; and afterwards releases wake waiters again.
func TestLostNoticeFallsBackToPolling(t *testing.T) {
	url := sharedRedis(t)
	check := client(t, url)
	ctx := context.Background()
	tests := []struct {
		name      string
		holderTTL time.Duration
		poll      time.Duration
		lose      func(t *testing.T, key string, held lock.Lease)
	}{
		{"key expires", 400 * time.Millisecond, time.Minute, func(*testing.T, string, lock.Lease) {}},
		{"key deleted", time.Minute, 300 * time.Millisecond, func(t *testing.T, key string, _ lock.Lease) {
			if err := check.Del(ctx, key).Err(); err != nil {
				t.Fatalf("DEL %s: %v", key, err)
			}
		}},
		{"subscriber killed", time.Minute, time.Minute, func(t *testing.T, key string, held lock.Lease) {
			killPubSub(t, check, "notify-waiter")
			if err := held.Release(ctx); err != nil {
				t.Fatalf("holder Release = %v", err)
			}
		}},
	}
	for _, lk := range lockers {
		for _, tt := range tests {
			t.Run(lk.name+"/"+tt.name, func(t *testing.T) {
				// The holder is a Mutex: it has no watchdog, so its key can expire.
				holder := closing(t, NewMutex(client(t, url), Options{Options: lock.Options{TTL: tt.holderTTL}}))
				var tries atomic.Int64
				opts, err := redis.ParseURL(url)
				if err != nil {
					t.Fatalf("redis.ParseURL(%q): %v", url, err)
				}
				opts.ClientName = "notify-waiter"
				wrdb := redis.NewClient(opts)
				wrdb.AddHook(acquireCounter(&tries))
				t.Cleanup(func() { _ = wrdb.Close() })
				// Turns off: the second waiter below must park on the
				// notifier, not wait its turn behind the first.
				wait := lk.new(t, wrdb, Options{PollInterval: tt.poll, noTurns: true})
				key := "lock:{lost-" + lk.name + "-" + strings.ReplaceAll(tt.name, " ", "-") + "}"
				held, err := holder.Lock(ctx, key)
				if err != nil {
					t.Fatalf("holder Lock(%q) = %v", key, err)
				}
				got := lockAsync(ctx, wait, "waiter", key)
				subscribed(t, check, key)
				tt.lose(t, key, held)
				l, _, err := got()
				if err != nil {
					t.Fatalf("waiter Lock(%q) after %s = %v, want the lock", key, tt.name, err)
				}

				// Releases wake waiters again: a second waiter, parked (two
				// tries made), acquires right after the first one releases.
				before := tries.Load()
				got = lockAsync(ctx, wait, "waiter-2", key)
				testenv.WaitFor(t, "the second waiter's two tries", 5*time.Second, func() bool { return tries.Load() >= before+2 })
				subscribed(t, check, key)
				released := time.Now()
				if err := l.Release(ctx); err != nil {
					t.Fatalf("waiter Release = %v", err)
				}
				l, at, err := got()
				if err != nil {
					t.Fatalf("second waiter Lock(%q) = %v, want the lock", key, err)
				}
				defer l.Release(ctx)
				if late := at.Sub(released); late > 500*time.Millisecond && tt.poll > time.Second {
					t.Errorf("second waiter acquired %v after the release, want well within 500ms", late)
				}
			})
		}
	}
}

// killPubSub kills the pub/sub connections of the clients named name.
func killPubSub(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	list, err := rdb.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatalf("CLIENT LIST TYPE pubsub: %v", err)
	}
	killed := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["name"] != name {
			continue
		}
		if err := rdb.Do(ctx, "CLIENT", "KILL", "ID", f["id"]).Err(); err != nil {
			t.Fatalf("CLIENT KILL ID %s: %v", f["id"], err)
		}
		killed++
	}
	if killed == 0 {
		t.Fatalf("no pub/sub connection named %q to kill in:\n%s", name, list)
	}
}

// TestPollDelay: timed retries are jittered over [p/2, p], p growing with
// the waiters on the key beyond pollShare, and come soon after the
// holder's remaining TTL when that is sooner.
func TestPollDelay(t *testing.T) {
	const poll = time.Second
	tests := []struct {
		waiting  int
		pttl     time.Duration
		min, max time.Duration
	}{
		{1, 0, poll / 2, poll},
		{pollShare, 0, poll / 2, poll},
		{10 * pollShare, 0, 5 * poll, 10 * poll},
		{1, -1, poll / 2, poll}, // no TTL reported
		{1, 100 * time.Millisecond, 100 * time.Millisecond, 100*time.Millisecond + 100*time.Millisecond/8 + time.Millisecond},
		{10 * pollShare, 3 * time.Second, 3 * time.Second, 3*time.Second + 3*time.Second/8 + time.Millisecond},
	}
	for _, tt := range tests {
		w := &waiter{n: newNotifier(nil), c: &channel{waiting: tt.waiting}}
		for range 100 {
			if d := w.pollDelay(poll, tt.pttl); d < tt.min || d > tt.max {
				t.Fatalf("pollDelay(%v, pttl %v) with %d waiting = %v, want within [%v, %v]", poll, tt.pttl, tt.waiting, d, tt.min, tt.max)
			}
		}
	}
}

// TestOverlapManyWaiters: mutual exclusion still holds with many waiters
// parked on notices (64 goroutines over two clients, each lock value with
// its own subscription), with the fallback retries frequent enough to
// race the notices too.
func TestOverlapManyWaiters(t *testing.T) {
	for _, noTurns := range []bool{false, true} {
		t.Run(fmt.Sprintf("noTurns=%v", noTurns), func(t *testing.T) { overlapManyWaiters(t, noTurns) })
	}
}

// overlapManyWaiters is TestOverlapManyWaiters with local turns (the
// default: one parked waiter per client) or without (all 32 per client
// parked on its notifier).
func overlapManyWaiters(t *testing.T, noTurns bool) {
	url := sharedRedis(t)
	c1, c2 := client(t, url), client(t, url)
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 30 * time.Second}, PollInterval: 20 * time.Millisecond, noTurns: noTurns}
	tests := []struct {
		name     string
		acquires []acquireFunc
	}{
		{"Mutex", []acquireFunc{
			mutexAcquire2(closing(t, NewMutex(c1, opts)), "lock:{many-m}"),
			mutexAcquire2(closing(t, NewMutex(c2, opts)), "lock:{many-m}")}},
		{"Reentrant", []acquireFunc{
			reentrantAcquire2(closing(t, NewReentrant(c1, opts)), "lock:{many-r}"),
			reentrantAcquire2(closing(t, NewReentrant(c2, opts)), "lock:{many-r}")}},
		{"Mutex and Reentrant", []acquireFunc{
			mutexAcquire2(closing(t, NewMutex(c1, opts)), "lock:{many-mr}"),
			reentrantAcquire2(closing(t, NewReentrant(c2, opts)), "lock:{many-mr}")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const goroutines, iters = 64, 5
			overlaps, entries, lost := runOverlap(t, []*redis.Client{c1, c2}, tt.acquires, goroutines, iters)
			if entries != goroutines*iters || overlaps != 0 || lost != 0 {
				t.Errorf("%s: %d critical sections (want %d), %d overlapped another, %d updates lost; want 0 and 0", tt.name, entries, goroutines*iters, overlaps, lost)
			}
		})
	}
}

type cancelKey struct{}

// TestNoticeOfAWaiterThatQuitsIsPassedOn: a release notice wakes one
// parked waiter; if that waiter leaves before its try used the notice (its
// try failed, or its caller gave up), the notice goes on to the next
// parked waiter, so the others still get the lock right after the release
// rather than at their timed retries, a minute away and past their budget.
// The woken waiter is made to quit through Options.FenceFloor, which its
// try asks once it finds the fencing counter gone. Local turns are off, so
// that the waiters park on the notifier (with them, one per process does).
func TestNoticeOfAWaiterThatQuitsIsPassedOn(t *testing.T) {
	url := sharedRedis(t)
	check := client(t, url)
	ctx := context.Background()
	quits := []struct {
		name string
		quit func(ctx context.Context) error // what the woken waiter's FenceFloor does
		want error
	}{
		{"try fails", func(context.Context) error { return errors.New("fence floor unavailable") }, nil},
		{"caller gives up", func(ctx context.Context) error {
			ctx.Value(cancelKey{}).(context.CancelFunc)()
			return ctx.Err()
		}, lock.ErrTimeout},
	}
	for _, lk := range lockers {
		for _, q := range quits {
			t.Run(lk.name+"/"+q.name, func(t *testing.T) {
				const n, wait = 12, 8 * time.Second
				var tries atomic.Int64
				var armed atomic.Bool
				opts := Options{Options: lock.Options{Wait: wait}, PollInterval: time.Minute,
					FenceFloor: func(ctx context.Context, _ string) (int64, error) {
						if armed.CompareAndSwap(true, false) {
							return 0, q.quit(ctx)
						}
						return 0, nil
					}, noTurns: true}
				lock := lk.new(t, client(t, url, acquireCounter(&tries)), opts)
				key := "lock:{quit-" + lk.name + "-" + strings.ReplaceAll(q.name, " ", "-") + "}"
				held, err := lock(ctx, "holder", key)
				if err != nil {
					t.Fatalf("holder Lock(%q) = %v", key, err)
				}
				var released atomic.Int64 // UnixNano of the holder's release
				var wg sync.WaitGroup
				var acquired atomic.Int64
				var mu sync.Mutex
				var quitErrs []error
				for g := range n {
					wg.Go(func() {
						wctx, cancel := context.WithCancel(ctx)
						defer cancel()
						l, err := lock(context.WithValue(wctx, cancelKey{}, context.CancelFunc(cancel)), fmt.Sprint("waiter-", g), key)
						if err != nil {
							mu.Lock()
							quitErrs = append(quitErrs, err)
							mu.Unlock()
							return
						}
						if late := time.Since(time.Unix(0, released.Load())); late > 2*time.Second {
							t.Errorf("waiter %d acquired %v after the release, want well within 2s (its timed retry is a minute away, its budget %v)", g, late, wait)
						}
						acquired.Add(1)
						if err := l.Release(ctx); err != nil {
							t.Errorf("waiter %d: Release = %v", g, err)
						}
					})
				}
				subscribed(t, check, key)
				// The holder's two tries (the first found no fencing counter),
				// then two per waiter before it parks.
				testenv.WaitFor(t, "every waiter's two tries", 5*time.Second, func() bool { return tries.Load() >= 2+2*n })
				// The next acquire finds no fencing counter and asks
				// FenceFloor, which makes that waiter quit.
				fk, _ := fenceKey(key)
				if err := check.Del(ctx, fk).Err(); err != nil {
					t.Fatal(err)
				}
				armed.Store(true)
				released.Store(time.Now().UnixNano())
				if err := held.Release(ctx); err != nil {
					t.Fatalf("holder Release = %v", err)
				}
				wg.Wait()
				if len(quitErrs) != 1 || (q.want != nil && !errors.Is(quitErrs[0], q.want)) {
					t.Errorf("waiters that failed: %v, want the one made to quit (%v)", quitErrs, q.want)
				}
				if got := acquired.Load(); got != n-1 {
					t.Errorf("%d of the %d other waiters acquired, want all", got, n-1)
				}
			})
		}
	}
}

// slowSubscriber is a client whose pub/sub connections go to another
// address (a cut link: SUBSCRIBE never gets its answer), while its other
// commands reach Redis.
type slowSubscriber struct {
	redis.UniversalClient
	sub *redis.Client
}

func (s slowSubscriber) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return s.sub.Subscribe(ctx, channels...)
}

// TestSlowSubscribeBlocksNoOne: a waiter whose SUBSCRIBE hangs (a new
// connection to Redis that gets no answer) must not hold up the other
// waiters of its lock, nor itself, past their budget: they fall back to
// timed retries until the subscription is confirmed. The subscription
// used to be sent under the notifier's mutex, which every join, park and
// leave takes.
func TestSlowSubscribeBlocksNoOne(t *testing.T) {
	url := sharedRedis(t)
	ctx := context.Background()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	const wait, hang = 500 * time.Millisecond, 5 * time.Second
	proxy, err := netproxy.Start("redis-"+t.Name(), opts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Cut(); err != nil {
		t.Fatal(err)
	}
	dialed := make(chan struct{}, 1)
	subOpts := *opts
	subOpts.Addr = proxy.Addr
	subOpts.ReadTimeout, subOpts.WriteTimeout = hang, hang
	subOpts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		select {
		case dialed <- struct{}{}:
		default:
		}
		return c, err
	}
	sub := redis.NewClient(&subOpts)
	t.Cleanup(func() { _ = sub.Close() })
	m := NewMutex(slowSubscriber{UniversalClient: client(t, url), sub: sub}, Options{Options: lock.Options{Wait: wait}})
	t.Cleanup(func() {
		proxy.Stop() // first: the hung SUBSCRIBE then fails at once, and Close need not wait for it
		m.Close()
	})

	holder := NewMutex(client(t, url), Options{})
	for _, key := range []string{"lock:{slow-sub-1}", "lock:{slow-sub-2}"} {
		l, err := holder.Lock(ctx, key)
		if err != nil {
			t.Fatalf("holder Lock(%q) = %v", key, err)
		}
		defer l.Release(ctx)
	}
	type result struct {
		took time.Duration
		err  error
	}
	lockTimed := func(key string) <-chan result {
		got := make(chan result, 1)
		go func() {
			start := time.Now()
			_, err := m.Lock(ctx, key)
			got <- result{time.Since(start), err}
		}()
		return got
	}
	first := lockTimed("lock:{slow-sub-1}")
	select {
	case <-dialed: // its SUBSCRIBE is on its way, on a connection that gets no answer
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter's subscriber never dialed")
	}
	second := lockTimed("lock:{slow-sub-2}")
	for i, got := range []<-chan result{first, second} {
		r := <-got
		if !errors.Is(r.err, lock.ErrTimeout) {
			t.Errorf("waiter %d: Lock = %v, want lock.ErrTimeout", i+1, r.err)
		}
		if r.took > wait+wait/2 {
			t.Errorf("waiter %d gave up after %v, want within its %v budget (and some slack): the hung SUBSCRIBE (%v) held it", i+1, r.took, wait, hang)
		} else {
			t.Logf("waiter %d gave up after %v (budget %v)", i+1, r.took, wait)
		}
	}
}
