package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var roots atomic.Int64

// testRoot is a Root of the test's own on the shared server.
func testRoot(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/test/%s-%d", name, roots.Add(1))
}

// newLocker is one "process": a Locker (one session) closed at the end.
func newLocker(t testing.TB, servers []string, opts Options) *Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := New(ctx, servers, opts)
	if err != nil {
		t.Fatalf("New(%v): %v", servers, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// inspector is a plain client for looking at the lock nodes.
func inspector(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(c.Close)
	testenv.WaitFor(t, "the inspector's session", 10*time.Second, func() bool { return c.State() == zk.StateHasSession })
	return c
}

// nodes lists a lock's nodes in sequence order (none if its parent is missing).
func nodes(t testing.TB, c *zk.Conn, root, key string) []string {
	t.Helper()
	children, _, err := c.Children(root + "/" + key)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("Children(%s/%s): %v", root, key, err)
	}
	return sortNodes(children)
}

func mustLock(t testing.TB, l *Locker, key string) *Lease {
	t.Helper()
	lease, err := l.Lock(context.Background(), key)
	if err != nil {
		t.Fatalf("Lock(%s) = %v", key, err)
	}
	return lease.(*Lease)
}

// cutter is a Dialer whose connections the test can cut, refusing new
// ones until healed: a network partition between one Locker and ZooKeeper.
type cutter struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (c *cutter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, errors.New("cut off (test)")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutter) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// TestMutualExclusion: 12 goroutines over three Lockers ("processes", one
// session each) take one lock 20 times each. No critical section overlaps
// another, and the fences the holders saw, in holding order, strictly
// increase. Without the lock (the control) sections do overlap, which
// proves the detector can see a broken lock.
func TestMutualExclusion(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 30 * time.Second}, Root: root}
	lockers := []*Locker{newLocker(t, servers, opts), newLocker(t, servers, opts), newLocker(t, servers, opts)}
	const goroutines, iters = 12, 20
	for _, locked := range []bool{true, false} {
		name := "lock"
		if !locked {
			name = "no lock (control)"
		}
		t.Run(name, func(t *testing.T) {
			var inside atomic.Int32
			var overlaps, entries atomic.Int64
			var mu sync.Mutex
			var fences []int64
			gate := make(chan struct{})
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					<-gate
					for i := range iters {
						var lease lock.Lease
						if locked {
							var err error
							if lease, err = lockers[g%3].Lock(context.Background(), "overlap"); err != nil {
								t.Errorf("goroutine %d, iteration %d: Lock = %v", g, i, err)
								return
							}
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						entries.Add(1)
						if lease != nil {
							mu.Lock()
							fences = append(fences, lease.Fence().Token)
							mu.Unlock()
						}
						time.Sleep(100 * time.Microsecond) // the work
						inside.Add(-1)
						if lease != nil {
							if err := lease.Release(context.Background()); err != nil {
								t.Errorf("goroutine %d, iteration %d: Release = %v", g, i, err)
							}
						}
					}
				})
			}
			close(gate)
			wg.Wait()
			t.Logf("%s: %d overlaps in %d critical sections", name, overlaps.Load(), entries.Load())
			if locked {
				if overlaps.Load() != 0 {
					t.Errorf("with the lock: %d overlaps, want 0", overlaps.Load())
				}
				for i := 1; i < len(fences); i++ {
					if fences[i] <= fences[i-1] {
						t.Errorf("holder %d's fence %d is not above holder %d's %d", i, fences[i], i-1, fences[i-1])
					}
				}
				if n := len(fences); n != goroutines*iters {
					t.Errorf("%d holders, want %d", n, goroutines*iters)
				}
			} else if overlaps.Load() == 0 {
				t.Errorf("without a lock: no overlaps, so the detector cannot see a broken lock")
			}
		})
	}
	if left := nodes(t, inspector(t, servers), root, "overlap"); len(left) != 0 {
		t.Errorf("lock nodes left after every release: %v", left)
	}
}

// TestFenceIsCzxid: the fence is the lock node's czxid, and a later
// holder's (of any key) is larger.
func TestFenceIsCzxid(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	l := newLocker(t, servers, Options{Root: root})
	c := inspector(t, servers)
	var last int64
	for i, key := range []string{"a", "b", "a"} {
		lease := mustLock(t, l, key)
		_, st, err := c.Get(lease.Path())
		if err != nil {
			t.Fatalf("Get(%s): %v", lease.Path(), err)
		}
		if lease.Fence().Token != st.Czxid {
			t.Errorf("lease %d: Fence() = %d, node's czxid = %d", i, lease.Fence().Token, st.Czxid)
		}
		if lease.Fence().Token <= last {
			t.Errorf("lease %d (%s): fence %d is not above the previous %d", i, key, lease.Fence().Token, last)
		}
		last = lease.Fence().Token
		if err := lease.Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

// TestTryLockExactlyOneWinner: 30 TryLocks at once over three Lockers on
// a free lock: one wins, the others get lock.ErrNotAcquired and leave no node.
func TestTryLockExactlyOneWinner(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	opts := Options{Root: root}
	lockers := []*Locker{newLocker(t, servers, opts), newLocker(t, servers, opts), newLocker(t, servers, opts)}
	gate := make(chan struct{})
	var wins, refused atomic.Int64
	var winner atomic.Pointer[Lease]
	var wg sync.WaitGroup
	for g := range 30 {
		wg.Go(func() {
			<-gate
			lease, err := lockers[g%3].TryLock(context.Background(), "one")
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(lease.(*Lease))
			case errors.Is(err, lock.ErrNotAcquired):
				refused.Add(1)
			default:
				t.Errorf("TryLock(one) = %v, want a lease or lock.ErrNotAcquired", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if wins.Load() != 1 || refused.Load() != 29 {
		t.Fatalf("30 TryLocks: %d won, %d refused; want 1 and 29", wins.Load(), refused.Load())
	}
	c := inspector(t, servers)
	if left := nodes(t, c, root, "one"); len(left) != 1 || root+"/one/"+left[0] != winner.Load().Path() {
		t.Errorf("nodes after the TryLocks: %v, want only the winner's %s", left, winner.Load().Path())
	}
	if err := winner.Load().Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
	if left := nodes(t, c, root, "one"); len(left) != 0 {
		t.Errorf("nodes after Release: %v, want none", left)
	}
}

// TestGiveUpLeavesNoNode: while the lock is held, Locks that run out of
// Options.Wait get lock.ErrTimeout wrapping DeadlineExceeded, Locks whose ctx
// is cancelled get lock.ErrTimeout wrapping Canceled, and neither leaves a node
// in the queue: afterwards only the holder's is there.
func TestGiveUpLeavesNoNode(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	holder := newLocker(t, servers, Options{Root: root})
	waiters := []*Locker{
		newLocker(t, servers, Options{Options: lock.Options{Wait: 150 * time.Millisecond}, Root: root}),
		newLocker(t, servers, Options{Options: lock.Options{Wait: 150 * time.Millisecond}, Root: root}),
	}
	c := inspector(t, servers)
	held := mustLock(t, holder, "k")

	t.Run("wait budget", func(t *testing.T) {
		start := time.Now()
		_, err := waiters[0].Lock(context.Background(), "k")
		if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock(k) while held = %v, want lock.ErrTimeout and DeadlineExceeded", err)
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("Lock(k) gave up after %v, before its 150ms Wait", d)
		}
	})
	t.Run("cancelled while queued", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := waiters[0].Lock(ctx, "k")
			done <- err
		}()
		testenv.WaitFor(t, "the waiter's node", 5*time.Second, func() bool { return len(nodes(t, c, root, "k")) == 2 })
		cancel()
		if err := <-done; !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
			t.Errorf("Lock(k) cancelled while queued = %v, want lock.ErrTimeout and Canceled", err)
		}
	})
	t.Run("many at once", func(t *testing.T) {
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				ctx := context.Background()
				if g%2 == 1 { // half cancelled at assorted moments, in flight or queued
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(g)*5*time.Millisecond)
					defer cancel()
				}
				if _, err := waiters[g%2].Lock(ctx, "k"); !errors.Is(err, lock.ErrTimeout) {
					t.Errorf("Lock(k) #%d while held = %v, want lock.ErrTimeout", g, err)
				}
			})
		}
		wg.Wait()
	})
	// A waiter cancelled while its create was in flight learns its node's
	// name only from the late reply, so that node is deleted just after its
	// Lock returned: wait for it (and fail if it stays).
	onlyHolder := func() bool {
		left := nodes(t, c, root, "k")
		return len(left) == 1 && root+"/k/"+left[0] == held.Path()
	}
	testenv.WaitFor(t, "only the holder's node to remain", 5*time.Second, onlyHolder)
	if err := held.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestFIFO: five waiters, each a Locker of its own (a replica), queue one
// after another (each after the previous one's node is there) behind a
// holder; they get the lock in that order.
func TestFIFO(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	opts := Options{Options: lock.Options{Wait: 30 * time.Second}, Root: root}
	var lockers []*Locker
	for range 6 {
		lockers = append(lockers, newLocker(t, servers, opts))
	}
	c := inspector(t, servers)
	held := mustLock(t, lockers[5], "fifo")
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	const waiters = 5
	for i := range waiters {
		wg.Go(func() {
			lease, err := lockers[i].Lock(context.Background(), "fifo")
			if err != nil {
				t.Errorf("waiter %d: Lock = %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := lease.Release(context.Background()); err != nil {
				t.Errorf("waiter %d: Release = %v", i, err)
			}
		})
		testenv.WaitFor(t, fmt.Sprintf("waiter %d's node", i), 5*time.Second, func() bool { return len(nodes(t, c, root, "fifo")) == i+2 })
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(order, want) {
		t.Errorf("waiters acquired in order %v, want %v (arrival order)", order, want)
	}
}

// TestSessionExpiry: the holder is cut off from ZooKeeper. Its lease's
// Context is cancelled at once (lock.ErrLost: the connection is gone, see the
// package doc); the server expires its session after the TTL and deletes
// its node, which wakes the waiter, who gets a larger fence. When the
// holder's network is back its client finds the session expired, its
// Release says lock.ErrNotHeld without touching the new holder's node, and it
// can lock again on a new session.
func TestSessionExpiry(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	var cut cutter
	a := newLocker(t, servers, Options{Options: lock.Options{TTL: 400 * time.Millisecond}, Root: root, Dialer: cut.dial})
	b := newLocker(t, servers, Options{Options: lock.Options{Wait: 20 * time.Second}, Root: root})
	ctx := context.Background()
	held := mustLock(t, a, "k")
	c := inspector(t, servers)

	got := make(chan lock.Lease, 1)
	go func() {
		lease, err := b.Lock(ctx, "k")
		if err != nil {
			t.Errorf("b: Lock = %v", err)
		}
		got <- lease
	}()
	testenv.WaitFor(t, "b's node", 5*time.Second, func() bool { return len(nodes(t, c, root, "k")) == 2 })

	cutAt := time.Now()
	cut.cut()
	select {
	case <-held.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a's lease Context not cancelled 5s after its connection was cut")
	}
	t.Logf("a's lease lost %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	if cause := context.Cause(held.Context()); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("a's lease cause = %v, want lock.ErrLost", cause)
	}
	if err := held.Err(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("a.Err() = %v, want lock.ErrLost", err)
	}
	var bl lock.Lease
	select {
	case bl = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("b did not get the lock within 10s of a's connection being cut (TTL 400ms)")
	}
	if bl == nil {
		t.FailNow()
	}
	t.Logf("b acquired %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	if bl.Fence().Token <= held.Fence().Token {
		t.Errorf("b's fence %d is not above a's %d", bl.Fence().Token, held.Fence().Token)
	}

	cut.heal()
	testenv.WaitFor(t, "a's client to find its session expired", 10*time.Second, func() bool {
		return a.conn.State() == zk.StateHasSession
	})
	if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("a.Release after its session expired = %v, want lock.ErrNotHeld", err)
	}
	if left := nodes(t, c, root, "k"); len(left) != 1 || root+"/k/"+left[0] != bl.(*Lease).Path() {
		t.Errorf("nodes after a's stale Release: %v, want only b's %s", left, bl.(*Lease).Path())
	}
	if err := bl.Release(ctx); err != nil {
		t.Errorf("b.Release = %v", err)
	}
	again, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("a: Lock on its new session = %v", err)
	}
	if again.Fence().Token <= bl.Fence().Token {
		t.Errorf("a's new fence %d is not above b's %d", again.Fence().Token, bl.Fence().Token)
	}
	if err := again.Release(ctx); err != nil {
		t.Errorf("a.Release (new session) = %v", err)
	}
}

// TestDisconnectKeepsNodeUntilRelease: a short cut (well within the
// session timeout) still loses the lease (ErrDisconnected: the holder
// cannot know), but the session survives and so does its node: nobody
// else gets the lock until the holder releases it.
func TestDisconnectKeepsNodeUntilRelease(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	var cut cutter
	a := newLocker(t, servers, Options{Options: lock.Options{TTL: 20 * time.Second}, Root: root, Dialer: cut.dial})
	b := newLocker(t, servers, Options{Root: root})
	ctx := context.Background()
	held := mustLock(t, a, "k")
	cut.cut()
	select {
	case <-held.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease Context not cancelled 5s after the cut")
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, ErrDisconnected) {
		t.Errorf("cause = %v, want ErrDisconnected", cause)
	}
	cut.heal()
	testenv.WaitFor(t, "a's client to reconnect", 10*time.Second, func() bool { return a.conn.State() == zk.StateHasSession })
	if _, err := b.TryLock(ctx, "k"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("b: TryLock while a's session lives = %v, want lock.ErrNotAcquired", err)
	}
	if err := held.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Errorf("a.Release = %v, want the loss reported (lock.ErrLost)", err)
	}
	bl, err := b.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("b: TryLock after a's Release = %v", err)
	}
	_ = bl.Release(ctx)
}

// TestNodeDeletedLosesLease: deleting the holder's node by hand loses its
// lease (ErrNodeDeleted) and lets the next waiter in.
func TestNodeDeletedLosesLease(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	l := newLocker(t, servers, Options{Root: root})
	held := mustLock(t, l, "k")
	if err := inspector(t, servers).Delete(held.Path(), -1); err != nil {
		t.Fatalf("Delete(%s): %v", held.Path(), err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease Context not cancelled 5s after its node was deleted")
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, ErrNodeDeleted) {
		t.Errorf("cause = %v, want ErrNodeDeleted", cause)
	}
	next, err := l.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatalf("TryLock after the holder's node was deleted = %v", err)
	}
	_ = next.Release(context.Background())
	if err := held.Release(context.Background()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of the deleted node's lease = %v, want lock.ErrNotHeld", err)
	}
}

// TestServerRestart: ZooKeeper restarts (with its data) under a holder:
// the lease is lost (the connection dropped), the session and its node
// survive, Release deletes the node, and fences keep growing.
func TestServerRestart(t *testing.T) {
	srv := testenv.ZooKeeperServer(t)
	servers := []string{srv.Addr}
	l := newLocker(t, servers, Options{Options: lock.Options{TTL: 20 * time.Second}})
	ctx := context.Background()
	held := mustLock(t, l, "k")
	t0 := time.Now()
	defer func() { t.Logf("done %v after the restart began", time.Since(t0)) }()
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease Context not cancelled 10s after the server restarted")
	}
	t.Logf("lease lost %v after the restart began", time.Since(t0))
	// The delete may be sent before the client has reconnected: then it
	// is finished in the background (lock.ErrReleaseUnknown), and the Lock
	// below waits for it.
	if err := held.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Release after the restart = %v, want the loss reported (lock.ErrLost)", err)
	}
	t.Logf("released %v after the restart began", time.Since(t0))
	next, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock after the restart = %v", err)
	}
	if next.Fence().Token <= held.Fence().Token {
		t.Errorf("fence after the restart %d is not above the one before %d", next.Fence().Token, held.Fence().Token)
	}
	_ = next.Release(ctx)
}

// TestCloseEndsLeases: Close cancels held leases (lock.ErrClosed), ends the
// session (the node goes at once, the waiter gets the lock), refuses
// further Locks, and leaves no goroutine behind.
func TestCloseEndsLeases(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	// The inspector is made after IgnoreCurrent and closed before the
	// check: a client starts a new read loop each time it reconnects, so an
	// inspector from before IgnoreCurrent that reconnected mid-test would
	// fail the check. (Once under make test, a recvLoop started by a
	// goroutine older than the check was still reading 15s on; the
	// inspector is the likeliest owner.)
	ignore := goleak.IgnoreCurrent()
	c := inspector(t, servers)
	root := testRoot(t)
	ctx := context.Background()
	func() {
		a, err := New(ctx, servers, Options{Root: root})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		b, err := New(ctx, servers, Options{Root: root})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer b.Close()
		held := mustLock(t, a, "k")
		got := make(chan error, 1)
		go func() {
			lease, err := b.Lock(ctx, "k")
			if err == nil {
				err = lease.Release(ctx)
			}
			got <- err
		}()
		testenv.WaitFor(t, "b's node", 5*time.Second, func() bool { return len(nodes(t, c, root, "k")) == 2 })
		if err := a.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if cause := context.Cause(held.Context()); !errors.Is(cause, lock.ErrClosed) {
			t.Errorf("held lease's cause after Close = %v, want lock.ErrClosed", cause)
		}
		if err := <-got; err != nil {
			t.Errorf("b after a's Close: %v, want the lock", err)
		}
		if _, err := a.Lock(ctx, "k"); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Lock after Close = %v, want lock.ErrClosed", err)
		}
		if err := held.Release(ctx); !errors.Is(err, lock.ErrLost) {
			t.Errorf("Release after Close = %v, want lock.ErrLost", err)
		}
	}()
	c.Close()
	testenv.NoLeaks(t, ignore)
}

// TestOneNodePerLocker: many Lock callers of one key in one Locker queue
// in memory; ZooKeeper sees at most one node of theirs at a time, and
// every caller gets the lock in turn.
func TestOneNodePerLocker(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	l := newLocker(t, servers, Options{Options: lock.Options{Wait: 30 * time.Second}, Root: root})
	c := inspector(t, servers)
	held := mustLock(t, l, "k")
	var wg sync.WaitGroup
	var got atomic.Int64
	for range 20 {
		wg.Go(func() {
			lease, err := l.Lock(context.Background(), "k")
			if err != nil {
				t.Errorf("Lock = %v", err)
				return
			}
			if n := len(nodes(t, c, root, "k")); n != 1 {
				t.Errorf("%d nodes while one caller of this Locker holds, want 1", n)
			}
			got.Add(1)
			_ = lease.Release(context.Background())
		})
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatalf("Release = %v", err)
	}
	wg.Wait()
	if got.Load() != 20 {
		t.Errorf("%d of 20 queued callers got the lock", got.Load())
	}
}

// TestHandshakeNeverAnsweredIsTriedAgain: a server that accepts the
// connection but never answers the session handshake (as a ZooKeeper
// starting up once did) holds a Locker at most one session timeout, not
// go-zookeeper's 10 × 2/3 of it (20 s for this 3 s TTL, past New's
// deadline here); the next connection gets the session.
func TestHandshakeNeverAnsweredIsTriedAgain(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	defer held.Wait() // after the Close below
	defer silent.Close()
	held.Go(func() { // accepts and keeps each connection, reading nothing
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	})
	var dials atomic.Int64
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if dials.Add(1) == 1 {
			addr = silent.Addr().String()
		}
		return net.DialTimeout(network, addr, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	l, err := New(ctx, servers, Options{Options: lock.Options{TTL: 3 * time.Second}, Root: testRoot(t), Dialer: dial})
	if err != nil {
		t.Fatalf("New, its first connection to a server that never answers = %v, want a session on the next one", err)
	}
	defer l.Close()
	if n := dials.Load(); n < 2 {
		t.Errorf("%d connections made, want the silent one and another", n)
	}
	lease, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	_ = lease.Release(ctx)
}
