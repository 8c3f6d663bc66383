package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/client"
	"inventory/internal/fleet"
	"inventory/internal/localstack"
	"inventory/internal/testenv"
)

// TestRedisClusterFailoverLosesTheLockAndTheServiceFollows runs
// redis-cluster-failover on a fleet whose replicas use a Redis Cluster:
// the lock the struck sale took on the master of its product's slot, while
// the replica's replication was held back, is absent on the replica that
// took over; the service sells again through its cluster client with
// nothing redirected by hand; the invariant holds; and Heal brings the old
// master back as a replica.
func TestRedisClusterFailoverLosesTheLockAndTheServiceFollows(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fault := &RedisClusterFailover{}
	opts := FleetOptions(fault, fleet.Options{
		NoLockServices: true, NoFsync: true, AdminToken: "tok",
		// The sale in flight holds its lock (30 s) for 3 s of work inside
		// its transaction: long enough to be struck, not to expire.
		Env: map[string]string{"INVENTORY_STRATEGY": "redis", "INVENTORY_WORK_DELAY": "3s", "INVENTORY_LOCK_TTL": "30s"},
	})
	f, err := fleet.Start(ctx, opts)
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	const product = "sku-cluster-failover"
	if p, err := f.Client().Restock(ctx, product, client.RestockRequest{Quantity: 10}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/%s = %+v, %v; want it created", product, p, err)
	}
	sell := func() int {
		_, err := f.Client().Sell(ctx, client.SaleRequest{ProductID: product, Quantity: 1}, client.SaleOptions{})
		if client.StatusOf(err) == 0 {
			t.Errorf("POST /sale: %v", err)
		}
		return client.StatusOf(err)
	}
	target := Target{Fleet: f, Product: product, Strategy: "redis", Strategies: offered()}
	if err := fault.AppliesTo(target); err != nil {
		t.Fatalf("AppliesTo(redis) = %v, want nil", err)
	}
	if err := fault.AppliesTo(Target{Strategy: "atomic", Strategies: offered()}); err == nil {
		t.Errorf("AppliesTo(atomic) = nil, want not applicable (atomic keeps nothing in Redis)")
	}
	oldMaster, err := f.RedisCluster.MasterOf(ctx, "lock:{"+product+"}")
	if err != nil {
		t.Fatal(err)
	}
	replica, err := f.RedisCluster.ReplicaOf(ctx, oldMaster)
	if err != nil {
		t.Fatal(err)
	}
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer onReplica.Close()

	selling := make(chan struct{})
	defer close(selling)
	target.Selling = selling
	injected := make(chan error, 1)
	go func() { injected <- fault.Inject(ctx, target) }()
	waitUntil(ctx, t, "the replica's replication to be held back (CLIENT PAUSE)", func() bool {
		clients, err := onReplica.ClientList(ctx).Result()
		return err == nil && strings.Contains(clients, "cmd=client|pause")
	})
	inFlight := make(chan int, 1) // the sale the fault strikes: it takes lock:{product} on the old master
	go func() { inFlight <- sell() }()
	if err := <-injected; err != nil {
		t.Fatalf("Inject: %v", err)
	}
	tookOver := time.Now()
	healed := false
	defer func() {
		if !healed {
			_ = fault.Heal(context.WithoutCancel(ctx))
		}
	}()
	if now, err := f.RedisCluster.MasterOf(ctx, "lock:{"+product+"}"); err != nil || now != replica {
		t.Fatalf("after Inject the master of the product's slot is %v (%v), want the replica %s", now, err, replica.Addr)
	}
	if n, err := onReplica.Exists(ctx, "lock:{"+product+"}").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS lock:{%s} on the new master = %d, %v; want 0 (taken on the old master after replication was held back)", product, n, err)
	}

	// The replicas' cluster clients find the new master by themselves;
	// until then a buyer gets 503.
	waitUntil(ctx, t, "a sale through the new master", func() bool {
		s := sell()
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			t.Fatalf("a sale after the failover = %d, want 200 or 503 while the replicas follow", s)
		}
		return s == http.StatusOK
	})
	t.Logf("first sale through the new master %v after it took over", time.Since(tookOver).Round(time.Millisecond))
	if got := <-inFlight; got != http.StatusOK && got != http.StatusServiceUnavailable {
		t.Errorf("the sale struck by the failover = %d, want 200 or 503", got)
	}

	healed = true
	began := time.Now()
	if err := fault.Heal(ctx); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	t.Logf("Heal took %v", time.Since(began).Round(time.Millisecond))
	if back, err := f.RedisCluster.ReplicaOf(ctx, replica); err != nil || back != oldMaster {
		t.Errorf("after Heal the new master's replica is %v (%v), want the old master %s", back, err, oldMaster.Addr)
	}
	p, err := f.Client().Product(ctx, product)
	if err != nil {
		t.Fatal(err)
	}
	if p.Quantity+p.Sold != 10 || p.Sold < 1 {
		t.Errorf("after the failover quantity %d + sold %d, want 10 with at least one sold", p.Quantity, p.Sold)
	}
}

// Side by side, redis-cluster-failover kills the master of struckKey's
// slot: Colocate places every run's product on it, a product already there
// keeping its id and the others taking the first suffix that moves them.
func TestColocatePutsEveryProductOnTheStruckMaster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := localstack.StartRedisCluster(ctx, localstack.RedisClusterOptions{})
	if err != nil {
		t.Fatalf("StartRedisCluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	struck, err := c.MasterOf(ctx, struckKey)
	if err != nil {
		t.Fatalf("MasterOf(%s): %v", struckKey, err)
	}
	fault, fl := &RedisClusterFailover{}, &fleet.Fleet{RedisCluster: c}
	moved := 0
	for i := range 12 {
		product := fmt.Sprintf("f1-redis-redis-cluster-failover-%d", i)
		id, err := fault.Colocate(ctx, fl, product)
		if err != nil {
			t.Fatalf("Colocate(%q): %v", product, err)
		}
		was, err := c.MasterOf(ctx, productKey(product))
		if err != nil {
			t.Fatalf("MasterOf(%s): %v", productKey(product), err)
		}
		now, err := c.MasterOf(ctx, productKey(id))
		if err != nil {
			t.Fatalf("MasterOf(%s): %v", productKey(id), err)
		}
		switch {
		case now != struck:
			t.Errorf("Colocate(%q) = %q, on %s; want it on %s, the master of %s's slot", product, id, now.Addr, struck.Addr, struckKey)
		case was == struck && id != product:
			t.Errorf("Colocate(%q) = %q; want %q, already on the struck master", product, id, product)
		case was != struck && !strings.HasPrefix(id, product+"-"):
			t.Errorf("Colocate(%q) = %q; want %q with a suffix", product, id, product)
		}
		if id != product {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("all 12 products were on the struck master already: the test moved none")
	}
}
