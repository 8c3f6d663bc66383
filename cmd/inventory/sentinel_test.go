package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	do := func(method, path, body string) int {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := do("PUT", "/products/sku-sentinel", `{"quantity":10}`); s != 201 {
		t.Fatalf("PUT product = %d, want 201", s)
	}
	if s := do("POST", "/sale", `{"product_id":"sku-sentinel","quantity":1}`); s != 200 {
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
		if s := do("POST", "/sale", `{"product_id":"sku-sentinel","quantity":1}`); s == 200 {
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
