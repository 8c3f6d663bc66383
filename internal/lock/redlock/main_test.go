package redlock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"inventory/internal/localstack"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// shared returns the binary's shared Redlock servers' URLs, flushed, and
// arranges a goroutine leak check when the test ends (after the clients
// it opens are closed).
func shared(t *testing.T) []string {
	t.Helper()
	urls := testenv.FlushRedlock(t)
	leakCheck(t)
	return urls
}

// private starts n servers of the test's own, to stop, pause or restart.
func private(t *testing.T, n int) ([]*localstack.Redis, []string) {
	t.Helper()
	leakCheck(t)
	servers := testenv.RedlockServers(t, n)
	urls := make([]string, n)
	for i, s := range servers {
		urls[i] = s.URL
	}
	return servers, urls
}

// leakCheck fails the test if it leaves goroutines behind. Call it before
// creating anything the test's cleanups stop, so it runs after them.
func leakCheck(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testenv.NoLeaks(t, ignore) })
}

// clients opens one go-redis client per URL ("one process's connections"),
// with context deadlines honoured as the package doc asks; the test closes
// them at its end.
func clients(t testing.TB, urls []string) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(urls))
	for i, u := range urls {
		opts, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("redis.ParseURL(%q): %v", u, err)
		}
		opts.ContextTimeoutEnabled = true
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// newLocker is a Locker with clients of its own, as a separate process has.
func newLocker(t testing.TB, urls []string, opts Options) *Locker {
	t.Helper()
	return New(clients(t, urls), opts)
}

// holders reports, per server, who holds key: "" for nobody, else the value.
func holders(t *testing.T, direct []redis.UniversalClient, key string) []string {
	t.Helper()
	out := make([]string, len(direct))
	for i, c := range direct {
		v, err := c.Get(context.Background(), key).Result()
		if err != nil && err != redis.Nil {
			t.Fatalf("GET %s on server %d: %v", key, i, err)
		}
		out[i] = v
	}
	return out
}

// ours counts the servers on which key carries lease's token.
func ours(t *testing.T, direct []redis.UniversalClient, le lock.Lease) int {
	l := le.(*Lease)
	t.Helper()
	n := 0
	for _, v := range holders(t, direct, l.Key()) {
		if strings.HasPrefix(v, l.token+":") {
			n++
		}
	}
	return n
}

// scriptCalls is how many scripts server c has run (EVAL and EVALSHA, as
// INFO commandstats counts them).
func scriptCalls(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name != "cmdstat_eval" && name != "cmdstat_evalsha" {
			continue
		}
		for _, field := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				calls, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				n += calls
			}
		}
	}
	return n
}

// noKeys waits until no server holds key: the deletes of a release beyond
// the majority, and of a lost try, finish in the background.
func noKeys(t *testing.T, direct []redis.UniversalClient, key string) {
	t.Helper()
	testenv.WaitFor(t, "no server to hold "+key, 5*time.Second, func() bool {
		h := holders(t, direct, key)
		return strings.Join(h, "") == ""
	})
}
