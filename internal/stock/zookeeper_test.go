package stock

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/zklock"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

func init() {
	backends = append(backends, func(t *testing.T, d *testDeps) {
		if d.Lockers[inventory.ZooKeeper] == nil {
			d.Lockers[inventory.ZooKeeper] = newZKLocker(t, zklock.Options{Options: lock.Options{TTL: d.Lock.TTL, Wait: d.Lock.Wait, Observer: d.Lock.Observer}})
		}
	})
}

// newZKLocker is one replica's ZooKeeper session, closed when the test ends.
func newZKLocker(t *testing.T, opts zklock.Options) *zklock.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := zklock.New(ctx, testenv.ZooKeeperServers(t), opts)
	if err != nil {
		t.Fatalf("zklock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// zkCutter is a Dialer whose connections the test can cut (and keep cut
// until healed): a network partition between one replica and ZooKeeper.
type zkCutter struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (c *zkCutter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
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

func (c *zkCutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

func (c *zkCutter) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// zkLockNodes counts the lock nodes of product id.
func zkLockNodes(t *testing.T, c *zk.Conn, id string) int {
	t.Helper()
	children, _, err := c.Children("/inventory/locks/" + redis.LockKey(id))
	if errors.Is(err, zk.ErrNoNode) {
		return 0
	}
	if err != nil {
		t.Fatalf("Children(%s): %v", redis.LockKey(id), err)
	}
	return len(children)
}

// zkQueued counts the lock nodes of product id (holder and waiters) on a
// connection of its own.
func zkQueued(t *testing.T, id string) int {
	c := zkInspector(t)
	defer c.Close()
	return zkLockNodes(t, c, id)
}

func zkInspector(t *testing.T) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(testenv.ZooKeeperServers(t), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(c.Close)
	waitFor(t, "a ZooKeeper session", 10*time.Second, func() bool { return c.State() == zk.StateHasSession })
	return c
}

// TestZooKeeperNotConfigured: without its locker the strategy is not
// available.
func TestZooKeeperNotConfigured(t *testing.T) {
	e := newEnv(t)
	if _, err := New(inventory.ZooKeeper, e.deps("replica-a").build(t)); !errors.Is(err, inventory.ErrNotConfigured) {
		t.Errorf("New(%q) without its locker = %v, want ErrNotConfigured", inventory.ZooKeeper, err)
	}
}

// TestZooKeeperSessionLostMidSale: replica a is cut off from ZooKeeper in
// the middle of its sale (inside the work, lock held, transaction open).
// Its lease is lost at once, which cancels its transaction: a gets
// ErrLockLost and nothing of its sale is committed. Once ZooKeeper expires
// a's session, replica b gets the lock and sells. The ledger matches.
func TestZooKeeperSessionLostMidSale(t *testing.T) {
	e := newEnv(t)
	const id = "zk-cut"
	e.restock(t, id, 10)
	var cut zkCutter
	da := e.deps("replica-a")
	da.Lockers = map[string]lock.Locker{inventory.ZooKeeper: newZKLocker(t, zklock.Options{Options: lock.Options{TTL: 500 * time.Millisecond, Wait: 5 * time.Second}, Dialer: cut.dial})}
	da.WorkDelay = 3 * time.Second
	a := e.seller(t, inventory.ZooKeeper, da)
	b := e.replica(t, inventory.ZooKeeper, "replica-b", 0)

	waitA := sellAsync(a, inventory.Order{ProductID: id, Quantity: 1})
	// a's node exists before a holds the lock (it still has to read its
	// predecessors): a cut then is a failed Lock, not a lost lease.
	waitClaimed(t, e)
	cut.cut()
	start := time.Now()
	_, errA := waitA()
	if !errors.Is(errA, inventory.ErrLockLost) {
		t.Errorf("replica a: Sell(%q, 1) cut off from ZooKeeper mid-sale = %v, want ErrLockLost", id, errA)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("replica a's sale ended %v after the cut, want promptly (its 3s of work cancelled)", d)
	}
	if _, err := b.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 2}); err != nil {
		t.Errorf("replica b: Sell(%q, 2) after a's session expired = %v, want a sale", id, err)
	}
	cut.heal()
	if p := e.checkLedger(t, id); p.Quantity != 8 || p.Sales != 1 {
		t.Errorf("after the cut: stock %d, %d ledger rows; want 8 and 1 (only b's sale)", p.Quantity, p.Sales)
	}
}

// TestZooKeeperStaleHolderRefused: holder a's session expires (it was cut
// off) before it writes; b gets the lock and sells; when a's write arrives
// with its older fence (its node's czxid), Postgres refuses it as a breach.
func TestZooKeeperStaleHolderRefused(t *testing.T) {
	e := newEnv(t)
	const id = "zk-stale"
	e.restock(t, id, 10)
	ctx := context.Background()
	var cut zkCutter
	la := newZKLocker(t, zklock.Options{Options: lock.Options{TTL: 300 * time.Millisecond}, Dialer: cut.dial})
	lb := newZKLocker(t, zklock.Options{Options: lock.Options{Wait: 10 * time.Second}})
	a, err := la.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("a: Lock = %v", err)
	}
	cut.cut() // a is "paused": its session expires, its node goes
	b, err := lb.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("b: Lock after a's session expired = %v", err)
	}
	defer func() { _ = b.Release(ctx) }()
	cut.heal()
	sell := func(fence int64) error {
		_, err := e.store.SellFenced(ctx, inventory.Order{ProductID: id, Quantity: 1}, inventory.ZooKeeper, "test", lock.Fence{Backend: zklock.Backend, Token: fence}, 0)
		return err
	}
	if err := sell(b.Fence().Token); err != nil {
		t.Fatalf("b's sale with fence %d = %v", b.Fence().Token, err)
	}
	if err := sell(a.Fence().Token); !errors.Is(err, inventory.ErrLockBreach) {
		t.Errorf("a's stale sale with fence %d after b's %d = %v, want ErrLockBreach", a.Fence().Token, b.Fence().Token, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 9 || p.Sales != 1 {
		t.Errorf("stock %d, %d ledger rows; want 9 and 1", p.Quantity, p.Sales)
	}
}
