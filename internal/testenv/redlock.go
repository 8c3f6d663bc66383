package testenv

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"inventory/internal/localstack"
	"inventory/internal/lock/redlock/redlockserve"
)

// RedlockEnv names comma-separated URLs of at least three independent Redis
// servers (not replicas of one another) for the Redlock tests, to use
// instead of throw-away local processes (ServerEnv of redlock's setting).
const RedlockEnv = "INVENTORY_TEST_REDLOCK_URLS"

// redlockSetting is redlock.Setting (see etcdSetting).
const redlockSetting = "INVENTORY_REDLOCK_URLS"

// RedlockN is how many servers the Redlock tests get by default.
const RedlockN = redlockserve.N

// RedlockURLs returns the URLs of this test binary's shared Redlock
// servers: RedlockEnv's when set, else RedlockN throw-away redis-server
// processes started by redlock's Server (see LockServer). They are not
// flushed: a test that needs them empty calls FlushRedlock; others use
// keys of their own (the stock tests' keys follow their product ids, and a
// lock left behind expires by its TTL).
func RedlockURLs(t testing.TB) []string {
	t.Helper()
	urls := splitList(LockServer(t, redlockSetting, &redlockserve.Server))
	if len(urls) < 3 {
		t.Fatalf("%s has %d URLs, want at least 3", RedlockEnv, len(urls))
	}
	return urls
}

// FlushRedlock empties the shared Redlock servers and returns their URLs.
// Tests that use it must not run in parallel with tests that use them.
func FlushRedlock(t testing.TB) []string {
	t.Helper()
	urls := RedlockURLs(t)
	for _, u := range urls {
		opts, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("parse %s entry %q: %v", RedlockEnv, u, err)
		}
		c := redis.NewClient(opts)
		err = c.FlushDB(context.Background()).Err()
		_ = c.Close()
		if err != nil {
			t.Fatalf("flush Redlock server %s: %v", opts.Addr, err)
		}
	}
	return urls
}

// RedlockServers starts n private redis-server processes for this test, for
// tests that stop, pause (SIGSTOP to Pid) or restart one empty (Restart);
// they are stopped when the test ends.
func RedlockServers(t testing.TB, n int) []*localstack.Redis {
	t.Helper()
	servers := make([]*localstack.Redis, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { servers[i], errs[i] = localstack.StartRedis(context.Background()) })
	}
	wg.Wait()
	for i, r := range servers {
		if r != nil {
			t.Cleanup(func() { _ = r.Stop() })
		}
		if errs[i] != nil {
			t.Fatalf("start private redis-server %d of %d: %v\n(install it: apt-get install -y redis-server)", i+1, n, errs[i])
		}
	}
	return servers
}
