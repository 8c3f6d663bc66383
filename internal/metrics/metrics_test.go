package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"inventory/internal/lock"
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

// TestBackendPings: every scrape pings each backend; one that answers has
// its round trip and up 1, one that fails has up 0 and no round trip.
func TestBackendPings(t *testing.T) {
	reg := prometheus.NewRegistry()
	pings := 0
	RegisterBackendPings(reg, map[string]Pinger{
		"postgres": func(context.Context) error { pings++; return nil },
		"redis":    func(context.Context) error { return errors.New("connection refused") },
	})
	want := `
# HELP inventory_backend_up 1 when the backend answered its ping at scrape time, else 0.
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
	if pings != 2 {
		t.Errorf("postgres pinged %d times in two scrapes, want 2", pings)
	}
}
