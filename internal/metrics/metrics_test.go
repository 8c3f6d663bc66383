package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

func TestLockResultLabels(t *testing.T) {
	wrap := func(backend string, err error) error {
		return &lock.Error{Backend: backend, Op: "lock", Key: "lock:{k}", Err: fmt.Errorf("ctx: %w", err)}
	}
	maxHold := fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrMaxHold)
	sessionExpired := fmt.Errorf("%w: ZooKeeper session expired", lock.ErrLost) // zklock's own cause
	for err, want := range map[error]string{
		nil:                                       "ok",
		wrap("redislock", lock.ErrNotAcquired):    "not_acquired",
		wrap("redislock", lock.ErrTimeout):        "timeout",
		wrap("redislock", maxHold):                "max_hold",
		wrap("redislock", lock.ErrLost):           "lost",
		wrap("redislock", lock.ErrNotHeld):        "not_held",
		wrap("redislock", lock.ErrReleaseUnknown): "unknown",
		errors.New("connection reset"):            "error",
		wrap("pglock", lock.ErrTimeout):           "timeout",
		wrap("pglock", lock.ErrNotAcquired):       "not_acquired",
		wrap("pglock", lock.ErrNotHeld):           "not_held",
		wrap("etcdlock", lock.ErrTimeout):         "timeout",
		wrap("zklock", sessionExpired):            "lost",
	} {
		if got := lockResult(err); got != want {
			t.Errorf("lockResult(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestHTTPCode(t *testing.T) {
	for code, want := range map[int]string{200: "200", 404: "404", 503: "503", 99: "other", 600: "other"} {
		if got := httpCode(code); got != want {
			t.Errorf("httpCode(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestEventsReachTheRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Strategies("redis", "reentrant")
	m.LockBreach("redis")
	m.LockBreach("redis")
	m.Sale("lua", "ok", 300*time.Microsecond)
	m.Sale("lua", "ok", 400*time.Microsecond) // the second through the remembered series
	m.Sale("lua", "sold-out", time.Millisecond)
	m.OptimisticConflict()
	m.Acquired("lock:{k}", nil, 2*time.Millisecond, 3)
	m.Lost("lock:{k}", &lock.Error{Err: lock.ErrLost})
	m.HTTPRequest("/sale", "POST", 200, time.Millisecond)

	want := `
# HELP inventory_sales_total Sale attempts by strategy and result.
# TYPE inventory_sales_total counter
inventory_sales_total{result="ok",strategy="lua"} 2
inventory_sales_total{result="sold-out",strategy="lua"} 1
# HELP inventory_lock_breaches_total Lock holders' writes that Postgres refused (stale fence or guard) because the lock had broken, by strategy.
# TYPE inventory_lock_breaches_total counter
inventory_lock_breaches_total{strategy="redis"} 2
inventory_lock_breaches_total{strategy="reentrant"} 0
# HELP inventory_optimistic_conflicts_total Optimistic compare-and-set attempts that lost and were retried.
# TYPE inventory_optimistic_conflicts_total counter
inventory_optimistic_conflicts_total 1
# HELP inventory_lock_lost_total Leases lost while held, by reason.
# TYPE inventory_lock_lost_total counter
inventory_lock_lost_total{reason="lost"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"inventory_sales_total", "inventory_lock_breaches_total", "inventory_optimistic_conflicts_total", "inventory_lock_lost_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.saleSeconds); n != 2 {
		t.Errorf("sale latency series = %d, want 2 (one per strategy and result)", n)
	}
}

// A client may send any method; each must not become a series of its own.
func TestHTTPRequestsKeepTheirLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	for _, method := range []string{"FOOBAR", "BAZ", "get", "POST", "POST"} {
		m.HTTPRequest("unmatched", method, http.StatusMethodNotAllowed, time.Millisecond)
	}
	want := `
# HELP inventory_http_requests_total HTTP requests by route, method and status code.
# TYPE inventory_http_requests_total counter
inventory_http_requests_total{code="405",method="POST",route="unmatched"} 2
inventory_http_requests_total{code="405",method="other",route="unmatched"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inventory_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.httpSeconds); n != 2 {
		t.Errorf("HTTP latency series = %d, want 2 (POST and other)", n)
	}
}

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestBackendPings: scrapes and readiness answer from the last background
// check and ping nothing themselves; one that answers has its round trip
// and up 1, one that fails up 0 and no round trip; a check older than
// MaxAge is down whatever it said.
func TestBackendPings(t *testing.T) {
	reg := prometheus.NewRegistry()
	var pings atomic.Int64
	redisErr := errors.New("connection refused")
	var redisDown atomic.Bool
	redisDown.Store(true)
	b := NewBackends(map[string]Pinger{
		"postgres": func(context.Context) error { pings.Add(1); return nil },
		"redis": func(context.Context) error {
			if redisDown.Load() {
				return redisErr
			}
			return nil
		},
	}, BackendOptions{Interval: time.Second})
	clk := &clock{now: time.Unix(1_000_000, 0)}
	b.now = clk.Now
	reg.MustRegister(b)

	if err := b.Ready(); !errors.Is(err, ErrBackendDown) || !strings.Contains(err.Error(), "not checked yet") {
		t.Errorf("Ready() before the first check = %v, want ErrBackendDown: not checked yet", err)
	}
	b.Check(context.Background())
	for range 50 { // a crowd of scrapes and readiness probes
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
		_ = b.Ready()
	}
	if got := pings.Load(); got != 1 {
		t.Errorf("postgres pinged %d times for one check, 50 scrapes and 50 readiness probes; want 1 (the check's)", got)
	}
	want := `
# HELP inventory_backend_up 1 when the backend answered its last background ping, recently enough for readiness; else 0.
# TYPE inventory_backend_up gauge
inventory_backend_up{backend="postgres"} 1
inventory_backend_up{backend="redis"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inventory_backend_up"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(reg, "inventory_backend_ping_seconds")
	if err != nil || n != 1 {
		t.Errorf("inventory_backend_ping_seconds series = %d, %v; want 1 (postgres only)", n, err)
	}
	if err := b.Ready(); !errors.Is(err, redisErr) || !strings.Contains(err.Error(), "redis") || strings.Contains(err.Error(), "postgres") {
		t.Errorf("Ready() with redis refusing = %v, want an error naming redis alone", err)
	}

	redisDown.Store(false)
	b.Check(context.Background())
	if err := b.Ready(); err != nil {
		t.Errorf("Ready() after both answered = %v, want nil", err)
	}
	clk.add(3 * time.Second) // MaxAge: 3 × Interval
	if err := b.Ready(); err != nil {
		t.Errorf("Ready() 3s after the last answers (MaxAge 3s) = %v, want nil", err)
	}
	clk.add(time.Millisecond)
	if err := b.Ready(); !errors.Is(err, ErrBackendDown) || !strings.Contains(err.Error(), "last answered 3.001s ago") {
		t.Errorf("Ready() past MaxAge with no check since = %v, want ErrBackendDown: last answered 3.001s ago", err)
	}
	want = `
# HELP inventory_backend_check_age_seconds Seconds since the backend last answered a background ping (absent before its first answer).
# TYPE inventory_backend_check_age_seconds gauge
inventory_backend_check_age_seconds{backend="postgres"} 3.001
inventory_backend_check_age_seconds{backend="redis"} 3.001
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inventory_backend_check_age_seconds"); err != nil {
		t.Error(err)
	}
}

// TestBackendsRunStops: Run checks at once and then every Interval until
// its context ends, then returns, leaving no goroutine behind.
func TestBackendsRunStops(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	checked := make(chan struct{}, 100)
	b := NewBackends(map[string]Pinger{"postgres": func(ctx context.Context) error {
		select {
		case checked <- struct{}{}:
		default:
		}
		return nil
	}}, BackendOptions{Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	for range 3 { // the first check, then two on the ticker
		select {
		case <-checked:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not ping three times within 10s")
		}
	}
	if err := b.Ready(); err != nil {
		t.Errorf("Ready() while Run pings a backend that answers = %v, want nil", err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
	testenv.NoLeaks(t, ignore)
}
