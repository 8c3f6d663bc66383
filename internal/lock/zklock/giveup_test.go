package zklock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"inventory/internal/localstack/netproxy"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// TestGiveUpWithinBudgetWhenZooKeeperIsSilent: a waiter whose link to
// ZooKeeper goes silent (no answers, nothing closed) gives up at its
// budget; deleting its node cannot be done then, and must not hold its
// answer: it is finished in the background once ZooKeeper answers again.
func TestGiveUpWithinBudgetWhenZooKeeperIsSilent(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	root := testRoot(t)
	proxy, err := netproxy.Start("zk-"+t.Name(), servers[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	viaProxy := func(network, _ string, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout(network, proxy.Addr, timeout)
	}
	holder := newLocker(t, servers, Options{Root: root})
	const wait = time.Second
	waiter := newLocker(t, servers, Options{Options: lock.Options{Wait: wait}, Root: root, Dialer: viaProxy})
	c := inspector(t, servers)
	held := mustLock(t, holder, "k")
	type result struct {
		took time.Duration
		err  error
	}
	got := make(chan result, 1)
	go func() {
		start := time.Now()
		_, err := waiter.Lock(context.Background(), "k")
		got <- result{time.Since(start), err}
	}()
	testenv.WaitFor(t, "the waiter's node", 5*time.Second, func() bool { return len(nodes(t, c, root, "k")) == 2 })
	if err := proxy.Cut(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if !errors.Is(r.err, lock.ErrTimeout) {
		t.Errorf("waiter: Lock = %v, want lock.ErrTimeout", r.err)
	}
	if r.took > wait+wait/2 {
		t.Errorf("waiter gave up after %v, want within its %v budget (and some slack): it waited to delete its node", r.took, wait)
	} else {
		t.Logf("waiter gave up after %v (budget %v)", r.took, wait)
	}
	proxy.Heal(context.Background())
	testenv.WaitFor(t, "the waiter's node deleted once ZooKeeper answers again", 10*time.Second, func() bool {
		return len(nodes(t, c, root, "k")) == 1
	})
	_ = held.Release(context.Background())
}
