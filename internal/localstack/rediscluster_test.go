package localstack

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisClusterFailsOverAndRejoins starts a cluster of three masters
// with a replica each, runs a script over two keys of one hash tag through
// a cluster client, kills the master of their slot and waits for its
// replica to take over and the client to follow; the old master, restarted,
// rejoins as a replica.
func TestRedisClusterFailsOverAndRejoins(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	c, err := StartRedisCluster(ctx, RedisClusterOptions{})
	if err != nil {
		t.Fatalf("StartRedisCluster: %v", err)
	}
	t.Logf("cluster of %d nodes ok %v after the start", len(c.Nodes), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = c.Stop() })
	if len(c.Nodes) != 6 {
		t.Fatalf("StartRedisCluster(zero options) started %d nodes, want 6", len(c.Nodes))
	}
	// go-redis reloads the slot map on MOVED, not when a master stops
	// answering: it would keep dialling the dead one for its 60s default.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Seeds(), ClusterStateReloadInterval: time.Second})
	defer rdb.Close()

	keys := []string{"stock:{sku-1}", "stock:{sku-1}:gen"}
	incr := redis.NewScript(`redis.call('INCR', KEYS[2]); return redis.call('INCR', KEYS[1])`)
	if n, err := incr.Run(ctx, rdb, keys).Int(); err != nil || n != 1 {
		t.Fatalf("script over %v = %d, %v; want 1", keys, n, err)
	}
	old, err := c.MasterOf(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	// The replica has the key before its master dies: WAIT.
	if err := rdb.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Logf("WAIT: %v", err)
	}
	if err := syscall.Kill(old.Pid(), syscall.SIGKILL); err != nil {
		t.Fatalf("kill the master of %q: %v", keys[0], err)
	}
	began := time.Now()
	err = poll(ctx, 30*time.Second, nil, func(ctx context.Context) error {
		now, err := c.MasterOf(ctx, keys[0])
		if err != nil {
			return err
		}
		if now == old {
			return fmt.Errorf("%s is still named master of %q", old.Addr, keys[0])
		}
		return incr.Run(ctx, rdb, keys).Err()
	})
	if err != nil {
		t.Fatalf("after killing master %s: %v", old.Addr, err)
	}
	t.Logf("the replica took over and the client followed %v after the kill", time.Since(began).Round(time.Millisecond))
	if n, err := rdb.Get(ctx, keys[0]).Int(); err != nil || n < 2 {
		t.Errorf("GET %s after the failover = %d, %v; want 2 or more (the replica had the first INCR)", keys[0], n, err)
	}
	rejoin := time.Now()
	if err := old.Restart(ctx); err != nil {
		t.Fatalf("restart %s: %v", old.Addr, err)
	}
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		t.Fatalf("after restarting the old master: %v", err)
	}
	t.Logf("the old master rejoined as a replica in %v", time.Since(rejoin).Round(time.Millisecond))
	if now, err := c.MasterOf(ctx, keys[0]); err != nil || now == old {
		t.Errorf("MasterOf(%q) after the old master rejoined = %v, %v; want its old replica", keys[0], now, err)
	}
}
