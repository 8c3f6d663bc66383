package faults

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/client"
	"inventory/internal/fleet"

	"inventory/internal/testenv"
)

// TestRedisFailoverLosesTheLockAndTheServiceFollowsTheSentinel runs
// redis-failover on a fleet that reaches Redis through a Sentinel: a lock
// taken on the primary while the replica's replication is held back is
// absent on the primary the Sentinel promotes (the lost lock: a second
// holder can take it), the replicas sell again through their failover
// client with nothing redirected by hand (they have no Redis link), and
// Heal leaves the old primary a replica of the new one.
func TestRedisFailoverLosesTheLockAndTheServiceFollowsTheSentinel(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f, err := fleet.Start(ctx, fleet.Options{
		RedisSentinel: true, NetLinks: true, NoLockServices: true, NoFsync: true, AdminToken: "tok",
		// The sale in flight holds its lock (30 s) for 3 s of work inside
		// its transaction: long enough to be struck, not to expire.
		Env: map[string]string{"INVENTORY_STRATEGY": "redis", "INVENTORY_WORK_DELAY": "3s", "INVENTORY_LOCK_TTL": "30s"},
	})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	for _, r := range f.Replicas {
		if r.RedisLink != nil || r.PostgresLink == nil {
			t.Fatalf("%s: Redis link %v, Postgres link %v; want none to Redis (it goes through the Sentinel), one to Postgres", r.Instance, r.RedisLink, r.PostgresLink)
		}
	}
	const product = "sku-failover"
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
	oldPrimary, replica := f.Redis, f.RedisReplica
	onOld := redis.NewClient(&redis.Options{Addr: oldPrimary.Addr, MaxRetries: -1})
	defer onOld.Close()
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer onReplica.Close()

	fault := &RedisFailover{}
	selling := make(chan struct{})
	defer close(selling)
	injected := make(chan error, 1)
	go func() {
		injected <- fault.Inject(ctx, Target{Fleet: f, Product: product, Strategy: "redis", Selling: selling})
	}()
	waitUntil(ctx, t, "the replica's replication to be held back (CLIENT PAUSE)", func() bool {
		clients, err := onReplica.ClientList(ctx).Result()
		return err == nil && strings.Contains(clients, "cmd=client|pause")
	})
	// A lock of our own, taken now on the primary, never reaches the replica.
	const ours = "lock:{sku-ours}"
	if err := onOld.SetNX(ctx, ours, "first-holder", time.Minute).Err(); err != nil {
		t.Fatalf("SET %s NX on the primary: %v", ours, err)
	}
	if n, err := onReplica.Exists(ctx, ours).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s on the held-back replica = %d, %v; want 0", ours, n, err)
	}
	inFlight := make(chan int, 1) // the sale the fault strikes: it takes lock:{sku-failover} on the primary
	go func() { inFlight <- sell() }()
	if err := <-injected; err != nil {
		t.Fatalf("Inject: %v", err)
	}
	promoted := time.Now()
	healed := false
	defer func() {
		if !healed {
			_ = fault.Heal(context.WithoutCancel(ctx))
		}
	}()

	if got, err := f.Sentinel.MasterAddr(ctx); err != nil || got != replica.Addr {
		t.Fatalf("after Inject the Sentinel names %q (%v) the master, want the replica %s", got, err, replica.Addr)
	}
	if f.Redis != replica || f.RedisReplica != oldPrimary || f.RedisURL != replica.URL {
		t.Errorf("after Inject the fleet's Redis is %s (replica %s), want the promoted %s", f.Redis.Addr, f.RedisReplica.Addr, replica.Addr)
	}
	onNew := onReplica
	for _, key := range []string{ours, "lock:{" + product + "}"} {
		if n, err := onNew.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Errorf("EXISTS %s on the new primary = %d, %v; want 0 (taken on the old primary after replication was held back)", key, n, err)
		}
	}
	second, err := onNew.SetNX(ctx, ours, "second-holder", time.Minute).Result()
	if err != nil || !second {
		t.Errorf("SET %s NX on the new primary = %v, %v; want a second holder to get the lock the first still holds", ours, second, err)
	}

	// Nobody redirects anything: the replicas' failover client asks the
	// Sentinel and finds the new primary. Until then a buyer gets 503.
	var sold int
	waitUntil(ctx, t, "a sale through the new primary", func() bool {
		sold = sell()
		if sold != http.StatusOK && sold != http.StatusServiceUnavailable {
			t.Fatalf("a sale after the failover = %d, want 200 or 503 while the replicas follow", sold)
		}
		return sold == http.StatusOK
	})
	t.Logf("first sale through the new primary %v after the Sentinel named it", time.Since(promoted).Round(time.Millisecond))
	if got := <-inFlight; got != http.StatusOK && got != http.StatusServiceUnavailable {
		t.Errorf("the sale struck by the failover = %d, want 200 or 503", got)
	}

	healed = true
	began := time.Now()
	if err := fault.Heal(ctx); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	t.Logf("Heal took %v", time.Since(began).Round(time.Millisecond))
	info, err := onOld.Info(ctx, "replication").Result()
	_, port, _ := strings.Cut(replica.Addr, ":")
	if err != nil || !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_port:"+port+"\r\n") {
		t.Errorf("after Heal the old primary's INFO replication = %q, %v; want a replica of %s", info, err, replica.Addr)
	}
	if n, err := onOld.Exists(ctx, ours).Result(); err != nil || n != 1 {
		t.Errorf("after Heal EXISTS %s on the old primary = %d, %v; want 1 (it restarted empty and synced the new primary)", ours, n, err)
	}
	p, err := f.Client().Product(ctx, product)
	if err != nil {
		t.Fatal(err)
	}
	if p.Quantity+p.Sold != 10 || p.Sold < 1 {
		t.Errorf("after the failover quantity %d + sold %d, want 10 with at least one sold", p.Quantity, p.Sold)
	}
}

// waitUntil polls cond until it holds, failing the test when ctx ends.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
