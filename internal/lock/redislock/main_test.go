package redislock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"inventory/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// sharedRedis flushes the shared test Redis and arranges for a goroutine
// leak check when the test ends (after the clients it opens are closed).
func sharedRedis(t *testing.T) string {
	t.Helper()
	url := testenv.RedisURL(t)
	leakCheck(t)
	return url
}

// leakCheck fails the test if it leaves goroutines behind. Call it before
// creating anything the test's cleanups stop, so it runs after them.
func leakCheck(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testenv.NoLeaks(t, ignore) })
}

// client opens a go-redis client on url that the test closes at its end.
func client(t testing.TB, url string, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis.ParseURL(%q): %v", url, err)
	}
	c := redis.NewClient(opts)
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	mu       sync.Mutex
	acquired []acquiredEvent
	renewed  []error
	lost     []error
	released []error
}

type acquiredEvent struct {
	err   error
	wait  time.Duration
	trips int
}

func (r *recorder) Acquired(_ string, err error, wait time.Duration, trips int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired = append(r.acquired, acquiredEvent{err, wait, trips})
}

func (r *recorder) Renewed(_ string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewed = append(r.renewed, err)
}

func (r *recorder) Lost(_ string, reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, reason)
}

func (r *recorder) Released(_ string, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, err)
}

func (r *recorder) renewals() (ok, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.renewed {
		if e == nil {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

func (r *recorder) losses() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.lost...)
}

// waitDone waits up to d for ctx to end and reports how long it took.
func waitDone(ctx context.Context, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(start), true
	case <-time.After(d):
		return d, false
	}
}

// evalHook wraps every EVAL/EVALSHA a client sends.
type evalHook func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (evalHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (evalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h evalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "eval", "evalsha":
			return h(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}
