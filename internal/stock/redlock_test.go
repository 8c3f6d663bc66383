package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redlock"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

// Every seller gets clients of its own on the shared Redlock servers.
func init() {
	backends = append(backends, func(t *testing.T, d *testDeps) {
		if d.Lockers[inventory.Redlock] == nil {
			d.Lockers[inventory.Redlock] = d.redlock(redlockClients(t, testenv.RedlockURLs(t)))
		}
	})
}

// redlock is the redlock strategy's locker on servers, built from d.Lock
// as cmd/inventory builds it.
func (d testDeps) redlock(servers []goredis.UniversalClient) lock.Locker {
	return redlock.New(servers, redlock.Options{
		Options:    d.Lock.Options,
		MinBackoff: d.Lock.MinBackoff,
		MaxBackoff: d.Lock.MaxBackoff,
		FenceFloor: d.Store.FenceFloor(redlock.Backend),
	})
}

// redlockClients opens one client per URL, as cmd/inventory does, closed
// when the test ends.
func redlockClients(t *testing.T, urls []string) []goredis.UniversalClient {
	t.Helper()
	cs := make([]goredis.UniversalClient, len(urls))
	for i, u := range urls {
		opts, err := goredis.ParseURL(u)
		if err != nil {
			t.Fatalf("goredis.ParseURL(%q): %v", u, err)
		}
		opts.ContextTimeoutEnabled = true
		c := goredis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// redlockHeld reports whether a majority of the shared Redlock servers
// holds product id's lock.
func redlockHeld(t *testing.T, id string) bool {
	n := 0
	for _, u := range testenv.RedlockURLs(t) {
		opts, err := goredis.ParseURL(u)
		if err != nil {
			t.Fatalf("goredis.ParseURL(%q): %v", u, err)
		}
		c := goredis.NewClient(opts)
		if v, err := c.Exists(context.Background(), redis.LockKey(id)).Result(); err == nil && v == 1 {
			n++
		}
		_ = c.Close()
	}
	return n >= 2
}

// TestRedlockNotConfigured: without its locker the strategy is not
// configured, and says which setting it needs.
func TestRedlockNotConfigured(t *testing.T) {
	e := newEnv(t)
	_, err := New(inventory.Redlock, e.deps("replica-a").build(t))
	if !errors.Is(err, inventory.ErrNotConfigured) {
		t.Errorf("New(%q) without its locker = %v, want ErrNotConfigured", inventory.Redlock, err)
	}
}

// TestRedlockRestartedServer plays Redlock's known breach out on a stock
// row. A holds exactly a majority of B's servers, 0 and 1 (A's own third
// server is held by someone else, as if B's server 2 had been out of A's
// reach), then server 0 restarts without its data. B, a replica selling through the
// strategy, wins servers 0 and 2 while A's lease is still valid: two
// holders at once. Server 0's counter restarts from the Postgres floor, so
// B's token equals A's; B claims the row first and sells, and when A writes
// Postgres refuses its token (not newer than the last claim): a counted
// breach, A's buyer gets lock-lost, and the ledger matches the stock.
func TestRedlockRestartedServer(t *testing.T) {
	e := newEnv(t)
	const id = "redlock-restart"
	e.restock(t, id, 3)
	ctx := context.Background()
	// Servers 0, 1 and 2 are B's; A's are 0, 1 and 3. A never talks to
	// server 2: freeing a key A also asked for would race A's late command
	// there (a Lock returns on a majority, the last server's reply pending).
	servers := testenv.RedlockServers(t, 4)
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL
	}
	direct := redlockClients(t, urls)
	d := e.deps("replica-b")
	d.Lockers = map[string]lock.Locker{inventory.Redlock: d.redlock(redlockClients(t, urls[:3]))}
	b := e.seller(t, inventory.Redlock, d)
	if _, err := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil { // counters on every server
		t.Fatalf("warm-up: Sell = %v", err)
	}

	a := redlock.New(redlockClients(t, []string{urls[0], urls[1], urls[3]}), redlock.Options{Options: lock.Options{TTL: 30 * time.Second}, FenceFloor: e.store.FenceFloor(redlock.Backend)})
	key := redis.LockKey(id)
	if err := direct[3].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	la, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatalf("A: Lock = %v", err)
	}
	defer func() { _ = la.Release(ctx) }()
	if err := servers[0].Restart(ctx); err != nil {
		t.Fatal(err)
	}

	sale, err := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
	if err != nil {
		t.Fatalf("B while A holds servers 0 and 1, server 0 restarted empty: Sell = %v, want a sale (the lock let B in)", err)
	}
	if la.Err() != nil {
		t.Fatalf("A's lease ended (%v) before B sold: no overlap shown", la.Err())
	}
	t.Logf("A holds with fence %d, B sold with fence %d at the same time", la.Fence().Token, sale.Fence)
	if sale.Fence < la.Fence().Token {
		t.Errorf("B's fence %d below A's %d: the Postgres floor did not hold", sale.Fence, la.Fence().Token)
	}

	_, err = e.store.SellFenced(la.Context(), inventory.Order{ProductID: id, Quantity: 1}, inventory.Redlock, "replica-a", lock.Fence{Backend: redlock.Backend, Token: la.Fence().Token}, 0)
	if !errors.Is(err, inventory.ErrLockBreach) || !errors.Is(err, inventory.ErrLockLost) {
		t.Errorf("A writing with fence %d after B's claim with %d: %v, want ErrLockBreach with ErrLockLost", la.Fence().Token, sale.Fence, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 1 || p.Sales != 2 {
		t.Errorf("stock %d with %d ledger rows, want 1 and 2 (the warm-up and B)", p.Quantity, p.Sales)
	}
}
