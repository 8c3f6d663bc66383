package stock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/etcdlock"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

func init() {
	backends = append(backends, func(t *testing.T, d *testDeps) {
		if d.Lockers[inventory.Etcd] == nil {
			d.Lockers[inventory.Etcd] = newEtcdLocker(t, d.Lock.TTL, d.Lock.Wait)
		}
	})
}

// newEtcdLocker dials a Locker of its own ("a replica's") on the shared
// test etcd, under a prefix of the test's own; the test closes it.
func newEtcdLocker(t *testing.T, ttl, wait time.Duration) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.Dial(context.Background(), testenv.EtcdEndpoints(t),
		etcdlock.Options{Options: lock.Options{TTL: ttl, Wait: wait}, Prefix: "/test/" + t.Name() + "/"})
	if err != nil {
		t.Fatalf("etcdlock.Dial: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// etcdContenders counts the keys in etcd, under any test's prefix, of
// contenders for product id's lock: the holder's and the waiters'.
func etcdContenders(t *testing.T, id string) int {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: testenv.EtcdEndpoints(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	defer c.Close()
	resp, err := c.Get(context.Background(), "/test/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("etcd Get /test/: %v", err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "/"+redis.LockKey(id)+"/") {
			n++
		}
	}
	return n
}

// TestEtcdNotConfigured: without its locker the strategy is not available.
func TestEtcdNotConfigured(t *testing.T) {
	e := newEnv(t)
	if _, err := New(inventory.Etcd, e.deps("replica-a").build(t)); !errors.Is(err, inventory.ErrNotConfigured) {
		t.Errorf("New(%q) without its locker = %v, want ErrNotConfigured", inventory.Etcd, err)
	}
}

// TestEtcdLeaseLostMidSale: the holder's etcd lease is revoked (as when it
// expires during a pause) while its sale works: the sale's transaction is
// cancelled and rolled back, the buyer gets ErrLockLost, nothing is sold.
func TestEtcdLeaseLostMidSale(t *testing.T) {
	t.Parallel()
	e := newOwnEnv(t)
	const id = "etcd-lost"
	e.restock(t, id, 10)
	d := e.deps("replica-a")
	d.WorkDelay = 3 * time.Second
	s := e.seller(t, inventory.Etcd, d)
	c, err := clientv3.New(clientv3.Config{Endpoints: testenv.EtcdEndpoints(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	defer c.Close()
	got := make(chan error, 1)
	go func() {
		_, err := s.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1})
		got <- err
	}()
	waitClaimed(t, e) // inside the critical section, past its Lock call
	var lease clientv3.LeaseID
	waitFor(t, "the seller's lock key in etcd", 5*time.Second, func() bool {
		resp, err := c.Get(context.Background(), "/test/"+t.Name()+"/"+redis.LockKey(id)+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		lease = clientv3.LeaseID(resp.Kvs[0].Lease)
		return true
	})
	if _, err := c.Revoke(context.Background(), lease); err != nil {
		t.Fatalf("revoke the holder's lease: %v", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, inventory.ErrLockLost) {
			t.Errorf("Sell whose etcd lease was revoked mid-sale = %v, want ErrLockLost", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Sell still running 2s after its lease was revoked (work 3s): not cancelled")
	}
	if p := e.checkLedger(t, id); p.Quantity != 10 || p.Sales != 0 {
		t.Errorf("stock %d with %d ledger rows after the lost sale, want 10 and 0", p.Quantity, p.Sales)
	}
	if _, err := s.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1}); err != nil {
		t.Errorf("next Sell on the same replica = %v, want nil (a new session)", err)
	}
}

// TestEtcdStaleHolderRefused: holder A loses its etcd lease (a pause past
// its TTL) before it writes; B takes the lock and sells; when A resumes and
// writes with its older create revision, Postgres refuses it as a breach.
func TestEtcdStaleHolderRefused(t *testing.T) {
	e := newEnv(t)
	const id = "etcd-stale"
	e.restock(t, id, 10)
	ctx := context.Background()
	la, lb := newEtcdLocker(t, 5*time.Second, 5*time.Second), newEtcdLocker(t, 5*time.Second, 5*time.Second)
	a, err := la.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	if _, err := la.Client().Revoke(ctx, a.(*etcdlock.Lease).LeaseID()); err != nil {
		t.Fatalf("revoke A's lease: %v", err)
	}
	b, err := lb.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("B: Lock after A's lease ended = %v", err)
	}
	defer func() { _ = b.Release(ctx) }()
	sell := func(fence int64) error {
		_, err := e.store.SellFenced(ctx, inventory.Order{ProductID: id, Quantity: 1}, inventory.Etcd, "test", lock.Fence{Backend: etcdlock.Backend, Token: fence}, 0)
		return err
	}
	if err := sell(b.Fence().Token); err != nil {
		t.Errorf("B (the holder, fence %d): sell = %v, want nil", b.Fence().Token, err)
	}
	if err := sell(a.Fence().Token); !errors.Is(err, inventory.ErrLockBreach) || !errors.Is(err, inventory.ErrLockLost) {
		t.Errorf("A (stale, fence %d < %d): sell = %v, want ErrLockBreach", a.Fence().Token, b.Fence().Token, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 9 || p.Sales != 1 {
		t.Errorf("stock %d with %d ledger rows, want 9 and 1", p.Quantity, p.Sales)
	}
	_ = a.Release(ctx)
}
