package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// TestMain runs the tests, or, started by a test as a child process (see
// child_test.go), a Runner until it is killed.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	testenv.Main(m)
}

// leakCheck fails the test if it leaves goroutines behind. Call it after
// starting the servers (whose goroutines live for the binary) and before
// creating anything the test's cleanups stop, so that it runs after them.
func leakCheck(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testenv.NoLeaks(t, ignore) })
}

// run is one run of a job as the job saw it.
type run struct {
	runner     string
	fence      lock.Fence
	start, end time.Time
	cause      error // context.Cause of the run's ctx when the job returned, nil if not cancelled
}

// runs collects the runs of jobs, and tells a waiter of each one's start.
type runs struct {
	mu      sync.Mutex
	all     []run
	started chan run // each run's start, if not nil; never blocks the job
}

func newRuns() *runs { return &runs{started: make(chan run, 1000)} }

// job returns a Job for runner that records its runs in rs; work, if not
// nil, is the run's work (its error is the run's).
func (rs *runs) job(runner string, work func(ctx context.Context, n int) error) Job {
	n := 0
	return func(ctx context.Context, fence lock.Fence) error {
		r := run{runner: runner, fence: fence, start: time.Now()}
		select {
		case rs.started <- r:
		default:
		}
		n++
		var err error
		if work != nil {
			err = work(ctx, n)
		}
		r.end = time.Now()
		r.cause = context.Cause(ctx)
		rs.mu.Lock()
		rs.all = append(rs.all, r)
		rs.mu.Unlock()
		return err
	}
}

// snapshot is the runs that ended so far, in the order they ended.
func (rs *runs) snapshot() []run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]run(nil), rs.all...)
}

// next waits up to limit for the next run to start and returns it.
func (rs *runs) next(t *testing.T, what string, limit time.Duration) run {
	t.Helper()
	select {
	case r := <-rs.started:
		return r
	case <-time.After(limit):
		t.Fatalf("waited %v for %s", limit, what)
		return run{}
	}
}

// work does d of simulated work, or less if ctx ends first (then ctx's
// error).
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// started is a running Runner; stop stops it and returns Run's error.
type started struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs r until the test ends or stop is called.
func start(t *testing.T, r *Runner) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- r.Run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels Run's ctx and waits for Run to return (it releases first).
func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.once.Do(func() {
		s.cancel()
		select {
		case s.err = <-s.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("Run did not return within 30s of its ctx ending")
		}
	})
	return s.err
}

// logs is a slog handler's output that tests read while a Runner writes.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// metric reads one series of reg's collectors: a counter's or gauge's
// value, a histogram's count.
func metric(t *testing.T, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	switch name {
	case "runs":
		return testutil.ToFloat64(m.runs.WithLabelValues(labels...))
	case "runner":
		return testutil.ToFloat64(m.runner.WithLabelValues(labels...))
	case "takeovers":
		return testutil.ToFloat64(m.takeovers.WithLabelValues(labels...))
	}
	t.Fatalf("no metric %q", name)
	return 0
}

// newMetrics are a replica's metrics on a registry of its own.
func newMetrics() (*Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return NewMetrics(reg), reg
}
