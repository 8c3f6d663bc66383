package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/localstack"
)

// RedisClusterEnv names comma-separated host:port seed nodes of a Redis
// Cluster for the tests that run against one, to use instead of a
// throw-away local cluster.
const RedisClusterEnv = "INVENTORY_TEST_REDIS_CLUSTER"

var redisCluster = &server{env: RedisClusterEnv, what: "Redis Cluster", start: startRedisCluster,
	hint: "set " + RedisClusterEnv + " to the seed nodes (host:port,...) of a Redis Cluster you run, or install redis-server: apt-get install -y redis-server"}

// RedisCluster returns the seed nodes of this test binary's Redis Cluster,
// every master flushed for this test: RedisClusterEnv's when set, else a
// throw-away cluster of three masters with a replica each, started on the
// first call (about 2 s) and stopped when the binary's tests end. Tests
// that share it must not run in parallel with each other.
func RedisCluster(t testing.TB) []string {
	t.Helper()
	seeds := splitList(redisCluster.get(t))
	c := ClusterClient(seeds)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
	if err != nil {
		t.Fatalf("flush the test Redis Cluster %v: %v", seeds, err)
	}
	return seeds
}

// ClusterClient is a cluster client of seeds with the options the service
// uses (see cmd/inventory): the slot map reloaded every second, so that
// it follows a master's failover (go-redis reloads it on MOVED, not when a
// master stops answering).
func ClusterClient(seeds []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, ClusterStateReloadInterval: time.Second})
}

func startRedisCluster(ctx context.Context) (string, func(), error) {
	c, err := localstack.StartRedisCluster(ctx, localstack.RedisClusterOptions{})
	if err != nil {
		return "", nil, err
	}
	return strings.Join(c.Seeds(), ","), func() { _ = c.Stop() }, nil
}

// PrivateRedisCluster starts a Redis Cluster of this test's own (three
// masters with a replica each), for tests that kill or restart its nodes;
// it is stopped when the test ends.
func PrivateRedisCluster(t testing.TB) *localstack.RedisCluster {
	t.Helper()
	c, err := localstack.StartRedisCluster(context.Background(), localstack.RedisClusterOptions{})
	if err != nil {
		t.Fatalf("start a private Redis Cluster: %v\n(install redis-server: apt-get install -y redis-server)", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}
