package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/client"
	"inventory/internal/localstack"
	"inventory/internal/testenv"
)

// TestRedisThroughSentinelFollowsAFailover: with INVENTORY_REDIS_SENTINELS
// and INVENTORY_REDIS_MASTER the service finds Redis through Sentinel (the
// URL points nowhere), and sells again once Sentinel has promoted the
// replica after the primary died.
func TestRedisThroughSentinelFollowsAFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, replica := testenv.RedisServer(t), testenv.RedisServer(t)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := rc.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	sentinel, err := localstack.StartSentinel(ctx, "inventory", primary.Addr)
	if err != nil {
		t.Fatalf("StartSentinel: %v", err)
	}
	t.Cleanup(func() { _ = sentinel.Stop() })

	base, _ := startService(t, map[string]string{
		"INVENTORY_REDIS_URL":       "redis://127.0.0.1:1/0", // nothing listens there
		"INVENTORY_REDIS_SENTINELS": sentinel.Addr,
		"INVENTORY_REDIS_MASTER":    "inventory",
		"INVENTORY_STRATEGY":        "redis",
	})
	admin, buyer := clients(base)
	sell := func() int {
		_, err := buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-sentinel", Quantity: 1}, client.SaleOptions{})
		if client.StatusOf(err) == 0 {
			t.Fatalf("POST /sale: %v", err)
		}
		return client.StatusOf(err)
	}
	if p, err := admin.Restock(ctx, "sku-sentinel", client.RestockRequest{Quantity: 10}); err != nil || p.Round != 1 {
		t.Fatalf("PUT product = %+v, %v; want it created", p, err)
	}
	if s := sell(); s != 200 {
		t.Fatalf("sale through the primary = %d, want 200", s)
	}

	if err := primary.Stop(); err != nil {
		t.Fatalf("stop the primary: %v", err)
	}
	for {
		addr, err := sentinel.MasterAddr(ctx)
		if err == nil && addr == replica.Addr {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Sentinel never promoted the replica (master %q, %v)", addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The service follows the new primary: a sale eventually succeeds.
	for {
		if s := sell(); s == 200 {
			break
		} else if s != 503 {
			t.Fatalf("sale during the failover = %d, want 200 or 503", s)
		}
		select {
		case <-ctx.Done():
			t.Fatal("no sale succeeded after the failover")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
