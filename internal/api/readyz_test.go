package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/metrics"
	"inventory/internal/testenv"
)

// TestReadyzAnswersFromTheBackgroundCheck: with a background check
// (metrics.Backends on a Postgres pool of its own), a crowd of concurrent
// GET /readyz takes no connection of the sales' pool and pings nothing
// beyond the check's own pings; a failed check makes it 503 naming the
// backend, until the next check answers.
func TestReadyzAnswersFromTheBackgroundCheck(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	health, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(health.Close)
	var pings atomic.Int64
	var postgresDown atomic.Bool
	refused := errors.New("connection refused")
	var backends *metrics.Backends
	f := newFixture(t, adminToken, func(c *Config) {
		backends = metrics.NewBackends(map[string]metrics.Pinger{
			"postgres": func(ctx context.Context) error {
				pings.Add(1)
				if postgresDown.Load() {
					return refused
				}
				return health.Ping(ctx)
			},
			"redis": func(ctx context.Context) error { return c.Redis.Ping(ctx).Err() },
		}, metrics.BackendOptions{})
		c.Readiness = backends
	})
	backends.Check(ctx)

	const crowd = 100
	before := f.pool.Stat().AcquireCount()
	var wg sync.WaitGroup
	codes := make(chan int, crowd)
	start := make(chan struct{})
	for range crowd {
		wg.Go(func() {
			<-start
			resp, err := http.Get(f.url + "/readyz")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("GET /readyz with both backends up = %d, want 200", code)
			break
		}
	}
	if got := f.pool.Stat().AcquireCount() - before; got != 0 {
		t.Errorf("%d concurrent GET /readyz took %d connections of the sales' pool, want 0", crowd, got)
	}
	if got := pings.Load(); got != 1 {
		t.Errorf("%d concurrent GET /readyz after one check: Postgres pinged %d times, want 1 (the check's)", crowd, got)
	}

	postgresDown.Store(true)
	backends.Check(ctx)
	r := f.do("GET", "/readyz", "", "")
	if r.status != http.StatusServiceUnavailable || r.body["type"] != "urn:inventory:problem:unavailable" {
		t.Errorf("GET /readyz after a failed check = %d %s, want 503 unavailable", r.status, r.raw)
	}
	postgresDown.Store(false)
	backends.Check(ctx)
	if r := f.do("GET", "/readyz", "", ""); r.status != http.StatusOK {
		t.Errorf("GET /readyz once the next check answered = %d %s, want 200", r.status, r.raw)
	}
}
