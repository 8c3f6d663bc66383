package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// prefix is a key prefix of the test's own on the shared etcd.
func prefix(t testing.TB) string { return "/test/" + t.Name() + "/" }

// newLocker dials a Locker ("one process") on eps with the test's prefix;
// the test closes it at its end.
func newLocker(t testing.TB, eps []string, opts Options) *Locker {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = prefix(t)
	}
	l, err := Dial(context.Background(), eps, opts)
	if err != nil {
		t.Fatalf("Dial(%v): %v", eps, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newClient is a plain etcd client for the test's own checks and faults.
func newClient(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New(%v): %v", eps, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keys lists the keys under the test's prefix for name.
func keys(t *testing.T, c *clientv3.Client, name string) []string {
	t.Helper()
	resp, err := c.Get(context.Background(), prefix(t)+name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("Get %s: %v", name, err)
	}
	var ks []string
	for _, kv := range resp.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks
}

// leakCheck fails the test if it leaves goroutines behind; call it first,
// so that it runs after the test's other cleanups.
func leakCheck(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testenv.NoLeaks(t, ignore) })
}

// waitDone waits up to d for ctx to end and reports how long it took.
func waitDone(ctx context.Context, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(start), true
	case <-time.After(d):
		return d, false
	}
}

// TestOverlapDetector: 3 Lockers ("processes") × 8 goroutines take one
// lock 20 times each; at most one is ever inside, and every holder's fence
// is larger than the one before. Goroutines sharing a Locker share its
// session, the case where concurrency.Mutex lets them all in (etcd#10756).
func TestOverlapDetector(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	leakCheck(t)
	var inside, maxInside atomic.Int64
	var mu sync.Mutex
	last, count := int64(0), 0
	var wg sync.WaitGroup
	for p := range 3 {
		l := newLocker(t, eps, Options{})
		for range 8 {
			wg.Go(func() {
				ctx := context.Background()
				for range 20 {
					lease, err := l.Lock(ctx, "hot")
					if err != nil {
						t.Errorf("process %d: Lock(hot) = %v", p, err)
						return
					}
					n := inside.Add(1)
					for {
						m := maxInside.Load()
						if n <= m || maxInside.CompareAndSwap(m, n) {
							break
						}
					}
					mu.Lock()
					if lease.Fence().Token <= last {
						t.Errorf("fence %d after %d: not increasing", lease.Fence().Token, last)
					}
					last = lease.Fence().Token
					count++
					mu.Unlock()
					inside.Add(-1)
					if err := lease.Release(ctx); err != nil {
						t.Errorf("Release = %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	if m := maxInside.Load(); m != 1 {
		t.Errorf("at most %d holders inside at once, want 1", m)
	}
	if count != 3*8*20 {
		t.Errorf("%d acquisitions, want %d", count, 3*8*20)
	}
	if ks := keys(t, newClient(t, eps), "hot"); len(ks) != 0 {
		t.Errorf("keys left after every release: %v", ks)
	}
}

// TestTryLockExactlyOneWinner: 10 goroutines over two Lockers try at once;
// exactly one gets the lock, the others get lock.ErrNotAcquired and leave no key.
func TestTryLockExactlyOneWinner(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	lockers := []*Locker{newLocker(t, eps, Options{}), newLocker(t, eps, Options{})}
	start := make(chan struct{})
	var wins atomic.Int64
	var wg sync.WaitGroup
	leases := make(chan lock.Lease, 10)
	for g := range 10 {
		wg.Go(func() {
			<-start
			lease, err := lockers[g%2].TryLock(context.Background(), "try")
			switch {
			case err == nil:
				wins.Add(1)
				leases <- lease
			case !errors.Is(err, lock.ErrNotAcquired):
				t.Errorf("TryLock(try) = %v, want nil or lock.ErrNotAcquired", err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(leases)
	if w := wins.Load(); w != 1 {
		t.Errorf("%d TryLock winners, want 1", w)
	}
	if ks := keys(t, newClient(t, eps), "try"); len(ks) != 1 {
		t.Errorf("keys while one holds: %v, want just the holder's", ks)
	}
	for l := range leases {
		_ = l.Release(context.Background())
	}
}

// TestWaiting: a waiter gives up at Options.Wait or when its ctx ends, with
// lock.ErrTimeout, whether it waits in etcd (another process holds) or in the
// Locker's local queue (another goroutine of its process holds), and
// leaves no key behind; it gets the lock once the holder releases.
func TestWaiting(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	leakCheck(t)
	c := newClient(t, eps)
	a := newLocker(t, eps, Options{})
	b := newLocker(t, eps, Options{Options: lock.Options{Wait: 300 * time.Millisecond}})
	ctx := context.Background()
	held, err := a.Lock(ctx, "w")
	if err != nil {
		t.Fatalf("A: Lock(w) = %v", err)
	}
	cancelAfter := func(d time.Duration) context.Context {
		c, cancel := context.WithCancel(ctx)
		time.AfterFunc(d, cancel)
		return c
	}
	deadlineAfter := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}
	cases := []struct {
		name    string
		l       *Locker
		ctx     func() context.Context
		wantCtx error
		min     time.Duration
	}{
		{"B (another process), Wait 300ms", b, func() context.Context { return ctx }, context.DeadlineExceeded, 300 * time.Millisecond},
		{"B, ctx cancelled after 200ms", b, func() context.Context { return cancelAfter(200 * time.Millisecond) }, context.Canceled, 200 * time.Millisecond},
		{"A's second goroutine (local queue), ctx deadline 200ms", a, func() context.Context { return deadlineAfter(200 * time.Millisecond) }, context.DeadlineExceeded, 200 * time.Millisecond},
	}
	for _, tc := range cases {
		t0 := time.Now()
		_, err := tc.l.Lock(tc.ctx(), "w")
		took := time.Since(t0)
		if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, tc.wantCtx) {
			t.Errorf("%s: Lock(w) = %v, want lock.ErrTimeout and %v", tc.name, err, tc.wantCtx)
		}
		if took < tc.min {
			t.Errorf("%s: Lock(w) gave up after %v, before %v", tc.name, took, tc.min)
		}
		if ks := keys(t, c, "w"); len(ks) != 1 || ks[0] != held.(*Lease).EtcdKey() {
			t.Errorf("%s: keys after giving up %v, want only the holder's %s", tc.name, ks, held.(*Lease).EtcdKey())
		}
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Lock(ctx, "w")
		if err == nil {
			if l.Fence().Token <= held.Fence().Token {
				err = fmt.Errorf("fence %d not above the previous holder's %d", l.Fence().Token, held.Fence().Token)
			}
			_ = l.Release(ctx)
		}
		got <- err
	}()
	// B's key must be in place before the release, so that B waits rather than finds it free.
	testenv.WaitFor(t, "B's key", 5*time.Second, func() bool { return len(keys(t, c, "w")) >= 2 })
	if err := held.Release(ctx); err != nil {
		t.Fatalf("A: Release = %v", err)
	}
	if err := <-got; err != nil {
		t.Errorf("B: Lock after A's release = %v", err)
	}
}

// TestLeaseLoss: a holder whose session lease is revoked, or whose key is
// deleted, by another client has its Context cancelled at once with
// lock.ErrLost; the next holder gets a larger fence; the Locker starts a new
// session for its next Lock.
func TestLeaseLoss(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	leakCheck(t)
	c := newClient(t, eps)
	faults := []struct {
		name   string
		inject func(*Lease) error
		reason error
	}{
		{"lease revoked", func(l *Lease) error {
			_, err := c.Revoke(context.Background(), l.LeaseID())
			return err
		}, nil},
		{"key deleted", func(l *Lease) error {
			_, err := c.Delete(context.Background(), l.EtcdKey())
			return err
		}, ErrKeyDeleted},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			a, b := newLocker(t, eps, Options{Options: lock.Options{TTL: 5 * time.Second}}), newLocker(t, eps, Options{})
			ctx := context.Background()
			held, err := a.Lock(ctx, "lost")
			if err != nil {
				t.Fatalf("A: Lock = %v", err)
			}
			if err := f.inject(held.(*Lease)); err != nil {
				t.Fatalf("inject %s: %v", f.name, err)
			}
			if took, ok := waitDone(held.Context(), 3*time.Second); !ok {
				t.Fatalf("A's Context not cancelled 3s after %s", f.name)
			} else {
				t.Logf("A's Context cancelled %v after %s", took, f.name)
			}
			if err := held.Err(); !errors.Is(err, lock.ErrLost) || (f.reason != nil && !errors.Is(err, f.reason)) {
				t.Errorf("A: Err() = %v, want lock.ErrLost (%v)", err, f.reason)
			}
			if cause := context.Cause(held.Context()); !errors.Is(cause, lock.ErrLost) {
				t.Errorf("A: Context cause %v, want lock.ErrLost", cause)
			}
			next, err := b.Lock(ctx, "lost")
			if err != nil {
				t.Fatalf("B: Lock after A's loss = %v", err)
			}
			if next.Fence().Token <= held.Fence().Token {
				t.Errorf("B's fence %d not above A's %d", next.Fence().Token, held.Fence().Token)
			}
			if err := held.Release(ctx); !errors.Is(err, lock.ErrLost) {
				t.Errorf("A: Release after the loss = %v, want lock.ErrLost", err)
			}
			if next.Err() != nil {
				t.Errorf("B's lease after A's late Release: %v", next.Err())
			}
			_ = next.Release(ctx)
			again, err := a.Lock(ctx, "lost")
			if err != nil {
				t.Fatalf("A: Lock after the loss = %v", err)
			}
			if again.Fence().Token <= next.Fence().Token {
				t.Errorf("A's new fence %d not above B's %d", again.Fence().Token, next.Fence().Token)
			}
			_ = again.Release(ctx)
		})
	}
}

// TestSessionEndsWhileWaiting: a waiter whose own lease is revoked stops
// waiting at once with ErrSessionEnded (etcd#19597) and leaves no key.
func TestSessionEndsWhileWaiting(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	c := newClient(t, eps)
	a, b := newLocker(t, eps, Options{}), newLocker(t, eps, Options{Options: lock.Options{Wait: 20 * time.Second}})
	ctx := context.Background()
	held, err := a.Lock(ctx, "s")
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	defer func() { _ = held.Release(ctx) }()
	warm, err := b.Lock(ctx, "warm") // B's session, to revoke
	if err != nil {
		t.Fatalf("B: Lock(warm) = %v", err)
	}
	lease := warm.(*Lease).LeaseID()
	_ = warm.Release(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := b.Lock(ctx, "s")
		got <- err
	}()
	testenv.WaitFor(t, "B's key", 5*time.Second, func() bool { return len(keys(t, c, "s")) >= 2 })
	t0 := time.Now()
	if _, err := c.Revoke(ctx, lease); err != nil {
		t.Fatalf("revoke B's lease: %v", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, ErrSessionEnded) {
			t.Errorf("B: Lock whose session was revoked = %v, want ErrSessionEnded", err)
		}
		t.Logf("B gave up %v after the revoke", time.Since(t0))
	case <-time.After(5 * time.Second):
		t.Fatal("B still waiting 5s after its lease was revoked")
	}
	if ks := keys(t, c, "s"); len(ks) != 1 {
		t.Errorf("keys %v, want only A's", ks)
	}
}

// TestEtcdPaused: etcd stopped (SIGSTOP) past the TTL: the holder's client
// gets no keepalive answer, declares the session over and cancels the
// lease's Context; a Lock while etcd is stopped times out at Wait (it does
// not hang); after SIGCONT another process gets the lock with a larger
// fence.
func TestEtcdPaused(t *testing.T) {
	srv := testenv.EtcdServer(t)
	eps := []string{srv.Endpoint}
	a := newLocker(t, eps, Options{Options: lock.Options{TTL: 2 * time.Second, Wait: 500 * time.Millisecond}})
	b := newLocker(t, eps, Options{Options: lock.Options{TTL: 2 * time.Second}})
	ctx := context.Background()
	held, err := a.Lock(ctx, "p")
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP etcd: %v", err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = srv.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	t0 := time.Now()
	if _, err := a.Lock(ctx, "other"); !errors.Is(err, lock.ErrTimeout) {
		t.Errorf("A: Lock(other) while etcd is stopped = %v, want lock.ErrTimeout", err)
	}
	took, ok := waitDone(held.Context(), 10*time.Second)
	if !ok {
		t.Fatal("A's Context not cancelled 10s into etcd's pause, with a 2s TTL")
	}
	t.Logf("A's Context cancelled %v after SIGSTOP (TTL 2s)", time.Since(t0))
	_ = took
	if err := held.Err(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("A: Err() = %v, want lock.ErrLost", err)
	}
	resume()
	next, err := b.Lock(ctx, "p")
	if err != nil {
		t.Fatalf("B: Lock after SIGCONT = %v", err)
	}
	if next.Fence().Token <= held.Fence().Token {
		t.Errorf("B's fence %d not above A's %d", next.Fence().Token, held.Fence().Token)
	}
	_ = next.Release(ctx)
	_ = held.Release(ctx)
}

// TestExcludesConcurrencyMutex: the Locker uses concurrency.Mutex's keys,
// so the two exclude each other on the same name.
func TestExcludesConcurrencyMutex(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	l := newLocker(t, eps, Options{})
	c := newClient(t, eps)
	s, err := concurrency.NewSession(c, concurrency.WithTTL(5))
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, prefix(t)+"x")
	ctx := context.Background()
	held, err := l.Lock(ctx, "x")
	if err != nil {
		t.Fatalf("Lock(x) = %v", err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Errorf("Mutex.TryLock while the Locker holds = %v, want ErrLocked", err)
	}
	_ = held.Release(ctx)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Mutex.Lock after release = %v", err)
	}
	if _, err := l.TryLock(ctx, "x"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock while the Mutex holds = %v, want lock.ErrNotAcquired", err)
	}
	_ = m.Unlock(ctx)
}

// TestClose: Close ends the session, which loses the leases still held and
// frees their keys; Lock fails with lock.ErrClosed afterwards.
func TestClose(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	c := newClient(t, eps)
	l := newLocker(t, eps, Options{})
	ctx := context.Background()
	held, err := l.Lock(ctx, "c")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if _, ok := waitDone(held.Context(), 3*time.Second); !ok || !errors.Is(held.Err(), lock.ErrLost) {
		t.Errorf("lease after Close: Err() = %v, want lock.ErrLost", held.Err())
	}
	if ks := keys(t, c, "c"); len(ks) != 0 {
		t.Errorf("keys after Close: %v", ks)
	}
	if _, err := l.Lock(ctx, "c"); !errors.Is(err, lock.ErrClosed) {
		t.Errorf("Lock after Close = %v, want lock.ErrClosed", err)
	}
}
