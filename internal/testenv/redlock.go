package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"inventory/internal/localstack"
)

// RedlockEnv names comma-separated URLs of at least three independent Redis
// servers (not replicas of one another) for the Redlock tests, to use
// instead of throw-away local processes.
const RedlockEnv = "INVENTORY_TEST_REDLOCK_URLS"

// RedlockN is how many servers the Redlock tests get by default.
const RedlockN = 3

var redlockServers = &server{env: RedlockEnv, what: "Redlock servers", start: startRedlock,
	hint: fmt.Sprintf("set %s to %d or more redis:// URLs, or install redis-server: apt-get install -y redis-server", RedlockEnv, RedlockN)}

// RedlockURLs returns the URLs of this test binary's shared Redlock
// servers: RedlockEnv's when set, else RedlockN throw-away redis-server
// processes. They are not flushed: a test that needs them empty calls
// FlushRedlock; others use keys of their own (the stock tests' keys follow
// their product ids, and a lock left behind expires by its TTL).
func RedlockURLs(t testing.TB) []string {
	t.Helper()
	urls := splitList(redlockServers.get(t))
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

func startRedlock(ctx context.Context) (string, func(), error) {
	servers := make([]*localstack.Redis, RedlockN)
	stop := func() {
		for _, r := range servers {
			if r != nil {
				_ = r.Stop()
			}
		}
	}
	urls := make([]string, RedlockN)
	for i := range servers {
		r, err := localstack.StartRedis(ctx)
		if err != nil {
			stop()
			return "", nil, err
		}
		servers[i], urls[i] = r, r.URL
	}
	return strings.Join(urls, ","), stop, nil
}
