package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inventory/internal/lock"
	"inventory/internal/lock/memlock"
	"inventory/internal/testenv"
)

// The tests in this file are the Runner's own logic, on memlock (a lock
// server in this process's memory) or a Locker that fails on purpose;
// backends_test.go runs Runners against the real lock backends.

// histogramCount is how many observations reg's histogram name has for
// the series with label task=task.
func histogramCount(t *testing.T, reg *prometheus.Registry, name, task string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "task" && l.GetValue() == task {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// TestANewHolderRunsAtOnceThenEveryInterval: the first run comes as soon
// as the lock is taken (the interval is an hour), with the lease's fence;
// a Runner with a short interval runs again and again on the grid of
// ticks an interval apart, never before its tick, under the same fence; the metrics say
// this replica runs the job and took it over once; Stop releases the lock
// and the gauge goes back to 0.
func TestANewHolderRunsAtOnceThenEveryInterval(t *testing.T) {
	leakCheck(t)
	srv := memlock.NewServer()
	m, reg := newMetrics()

	rs := newRuns()
	hourly := start(t, New(memlock.New(srv, lock.Options{TTL: time.Minute}), "sweep", rs.job("hourly", nil), Options{Name: "hourly", Interval: time.Hour, Metrics: m}))
	if r := rs.next(t, "the first run of a job run hourly", 10*time.Second); r.fence != (lock.Fence{Backend: memlock.Backend, Token: 1}) {
		t.Errorf("first run's fence = %+v, want the lease's, {memlock 1}", r.fence)
	}
	if err := hourly.stop(t); err != nil {
		t.Errorf("Run = %v, want nil once its ctx ended", err)
	}

	const interval = 30 * time.Millisecond
	begun := time.Now() // no earlier than the first run's tick
	s := start(t, New(memlock.New(srv, lock.Options{TTL: time.Minute}), "sweep", rs.job("often", nil), Options{Name: "often", Interval: interval, Metrics: m}))
	var got []run
	for range 4 {
		got = append(got, rs.next(t, "a run", 10*time.Second))
	}
	for i := 1; i < len(got); i++ {
		// Run i is due i ticks after the first's tick, which is no earlier
		// than begun: late or not, never early. (Not i intervals after the
		// first run began: that one may have started late for its tick, by
		// 0.6 ms once under load, and the ticks keep their schedule.)
		if gap, tick := got[i].start.Sub(begun), time.Duration(i)*interval; gap < tick {
			t.Errorf("run %d started %v after the runner, want at least %d intervals, %v", i+1, gap, i, tick)
		}
		if got[i].fence != got[0].fence {
			t.Errorf("run %d's fence = %+v, want the lease's, %+v (one lease)", i, got[i].fence, got[0].fence)
		}
	}
	if got[0].fence.Token != 2 {
		t.Errorf("fence of the second holder's lease = %d, want 2", got[0].fence.Token)
	}
	if v := metric(t, m, "runner", "often"); v != 1 {
		t.Errorf("inventory_job_runner{task=often} = %v while it runs, want 1", v)
	}
	if v := metric(t, m, "takeovers", "often"); v != 1 {
		t.Errorf("inventory_job_takeovers_total{task=often} = %v, want 1 (the start)", v)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("Run = %v, want nil once its ctx ended", err)
	}
	if _, held := srv.Holder("sweep"); held {
		t.Errorf("the lock is still held after Run returned, want it released")
	}
	if v := metric(t, m, "runner", "often"); v != 0 {
		t.Errorf("inventory_job_runner{task=often} = %v after Stop, want 0", v)
	}
	ok := metric(t, m, "runs", "often", OutcomeOK)
	if ok < 4 {
		t.Errorf("inventory_job_runs_total{task=often,outcome=ok} = %v, want at least the 4 runs seen", ok)
	}
	if n := histogramCount(t, reg, "inventory_job_lag_seconds", "often"); float64(n) != ok {
		t.Errorf("inventory_job_lag_seconds{task=often} has %d observations, want one per run, %v", n, ok)
	}
}

// TestAFailedRunIsCountedAndTheNextRuns: a run that returns an error and
// one that panics are logged and counted as failed, and the runs go on
// at the interval, under the same lease.
func TestAFailedRunIsCountedAndTheNextRuns(t *testing.T) {
	leakCheck(t)
	m, _ := newMetrics()
	var out logs
	rs := newRuns()
	job := rs.job("a", func(_ context.Context, n int) error {
		switch n {
		case 1:
			return errors.New("postgres is away")
		case 2:
			var orders map[string]int
			orders["o-1"]++ // a bug: nil map
		}
		return nil
	})
	s := start(t, New(memlock.New(memlock.NewServer(), lock.Options{TTL: time.Minute}), "sweep", job, Options{Interval: 10 * time.Millisecond, Metrics: m, Logger: out.logger()}))
	var got []run
	for range 4 {
		got = append(got, rs.next(t, "a run", 10*time.Second))
	}
	if err := s.stop(t); err != nil {
		t.Errorf("Run = %v, want nil once its ctx ended", err)
	}
	for i, r := range got {
		if r.fence != got[0].fence {
			t.Errorf("run %d's fence = %+v, want %+v: a failed run does not give the lease up", i+1, r.fence, got[0].fence)
		}
	}
	if v := metric(t, m, "runs", "sweep", OutcomeFailed); v != 2 {
		t.Errorf("inventory_job_runs_total{outcome=failed} = %v, want 2 (an error, a panic)", v)
	}
	if v := metric(t, m, "runs", "sweep", OutcomeOK); v < 2 {
		t.Errorf("inventory_job_runs_total{outcome=ok} = %v, want the runs after the failures, at least 2", v)
	}
	log := out.String()
	if n := strings.Count(log, `msg="job: run failed"`); n != 2 {
		t.Errorf("the log has %d failed runs, want 2:\n%s", n, log)
	}
	for _, want := range []string{"postgres is away", "panicked: assignment to entry in nil map", "job=sweep", "lock_key=sweep"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}

// TestALostLeaseCancelsItsRun: the server lets the holder's lock go in
// the middle of a run; the run's ctx is cancelled with a cause wrapping
// lock.ErrLost, the run counts as lost, and the Runner takes the lock
// again and runs under the new lease's fence, never the old one's.
func TestALostLeaseCancelsItsRun(t *testing.T) {
	leakCheck(t)
	srv := memlock.NewServer()
	m, _ := newMetrics()
	rs := newRuns()
	job := rs.job("a", func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done() // the first run lasts until its lease is lost
			return fmt.Errorf("sweep: %w", context.Cause(ctx))
		}
		return nil
	})
	start(t, New(memlock.New(srv, lock.Options{TTL: time.Minute}), "sweep", job, Options{Interval: 10 * time.Millisecond, Metrics: m}))
	first := rs.next(t, "the first run", 10*time.Second)
	if !srv.Expire("sweep") {
		t.Fatal("Expire(sweep): not held during the first run")
	}
	second := rs.next(t, "a run after the loss", 10*time.Second)
	if second.fence.Token <= first.fence.Token {
		t.Errorf("fence after the loss = %d, want above the lost lease's, %d", second.fence.Token, first.fence.Token)
	}
	runs := rs.snapshot()
	if len(runs) == 0 || !errors.Is(runs[0].cause, lock.ErrLost) {
		t.Fatalf("the first run ended with its ctx's cause %v, want one wrapping lock.ErrLost", runs[0].cause)
	}
	if v := metric(t, m, "runs", "sweep", OutcomeLost); v != 1 {
		t.Errorf("inventory_job_runs_total{outcome=lost} = %v, want 1", v)
	}
	if v := metric(t, m, "takeovers", "sweep"); v != 1 {
		t.Errorf("inventory_job_takeovers_total = %v, want 1: the job stayed on this replica", v)
	}
}

// TestALeaseThatEndsAtItsTTLIsTakenAgain: a lock without renewal ends
// each lease at its TTL; the Runner takes the lock again and goes on, each
// run with the current lease's fence (they grow, and none comes back),
// and the job staying on this replica is not a takeover.
func TestALeaseThatEndsAtItsTTLIsTakenAgain(t *testing.T) {
	leakCheck(t)
	m, _ := newMetrics()
	rs := newRuns()
	start(t, New(memlock.New(memlock.NewServer(), lock.Options{TTL: 150 * time.Millisecond}), "sweep", rs.job("a", nil), Options{Interval: 10 * time.Millisecond, Metrics: m}))
	for r := rs.next(t, "a run", 10*time.Second); r.fence.Token < 4; {
		r = rs.next(t, "a run under the fourth lease", 10*time.Second)
	}
	runs := rs.snapshot()
	for i := 1; i < len(runs); i++ {
		if runs[i].fence.Token < runs[i-1].fence.Token {
			t.Errorf("run %d had fence %d after a run with %d: an old lease's fence came back", i, runs[i].fence.Token, runs[i-1].fence.Token)
		}
	}
	if v := metric(t, m, "takeovers", "sweep"); v != 1 {
		t.Errorf("inventory_job_takeovers_total = %v, want 1 (the start): taking its own lock again is no takeover", v)
	}
}

// TestNextTick: the next run is due at the first tick after the run
// before ended, never at once; its lag counts from the first tick after
// that run started.
func TestNextTick(t *testing.T) {
	const i = 100 * time.Millisecond
	due := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return due.Add(d) }
	for _, c := range []struct {
		name                string
		start, end          time.Duration // after due
		wantNext, wantSince time.Duration // after due
	}{
		{"on time, short", 0, time.Millisecond, i, i},
		{"started late (a pause of 2.5 ticks), short: no catch-up run", 5 * i / 2, 5*i/2 + time.Millisecond, 3 * i, 3 * i},
		{"overran 3.75 ticks: the next tick after it, lag from tick 1", time.Millisecond, 15 * i / 4, 4 * i, i},
		{"late and overran", 3 * i / 2, 32 * i / 10, 4 * i, 2 * i},
		{"ended on a tick: the one after", 0, 2 * i, 3 * i, i},
	} {
		next, since := nextTick(due, at(c.start), at(c.end), i)
		if next != at(c.wantNext) || since != at(c.wantSince) {
			t.Errorf("%s: nextTick(due, due+%v, due+%v, %v) = due+%v, due+%v; want due+%v, due+%v",
				c.name, c.start, c.end, i, next.Sub(due), since.Sub(due), c.wantNext, c.wantSince)
		}
	}
}

// TestAnOverrunIsLag: the first run takes 3.75 intervals; the next waits
// for the tick after it (the fourth) rather than making up ticks 1-3 back
// to back, and its lag, counted from tick 1, is at least 3 intervals.
func TestAnOverrunIsLag(t *testing.T) {
	leakCheck(t)
	const interval = 40 * time.Millisecond
	m, reg := newMetrics()
	rs := newRuns()
	job := rs.job("a", func(ctx context.Context, n int) error {
		if n == 1 {
			return work(ctx, interval*15/4)
		}
		return nil
	})
	start(t, New(memlock.New(memlock.NewServer(), lock.Options{TTL: time.Minute}), "sweep", job, Options{Interval: interval, Metrics: m}))
	got := []run{rs.next(t, "run 1", 10*time.Second), rs.next(t, "run 2", 10*time.Second)}
	if gap := got[1].start.Sub(got[0].start); gap < 15*interval/4 {
		t.Errorf("run 2 started %v after run 1, want after run 1's 3.75 intervals (%v)", gap, 15*interval/4)
	}
	// A run's lag is recorded once it has returned.
	testenv.WaitFor(t, "run 2's lag to be recorded", 10*time.Second, func() bool {
		return histogramCount(t, reg, "inventory_job_lag_seconds", "sweep") >= 2
	})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "inventory_job_lag_seconds" {
			continue
		}
		if sum := mf.GetMetric()[0].GetHistogram().GetSampleSum(); sum < (3 * interval).Seconds() {
			t.Errorf("sum of lags = %.3fs, want at least %.3fs (run 2, due at tick 1, ran at tick 4)", sum, (3 * interval).Seconds())
		}
	}
}

// TestRunRefusesASecondRun: a Runner that runs refuses a second Run, which
// would run the job beside the first.
func TestRunRefusesASecondRun(t *testing.T) {
	leakCheck(t)
	rs := newRuns()
	r := New(memlock.New(memlock.NewServer(), lock.Options{TTL: time.Minute}), "sweep", rs.job("a", nil), Options{Interval: time.Hour})
	start(t, r)
	rs.next(t, "the first run", 10*time.Second)
	if err := r.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("a second Run = %v, want ErrRunning", err)
	}
}

// failing is a Locker that fails its first Lock calls with errs, in turn,
// and then takes locks from l.
type failing struct {
	l     lock.Locker
	errs  []error
	calls atomic.Int64
}

func (f *failing) Lock(ctx context.Context, key string) (lock.Lease, error) {
	if n := f.calls.Add(1); int(n) <= len(f.errs) {
		return nil, &lock.Error{Backend: "failing", Op: "lock", Key: key, Err: f.errs[n-1]}
	}
	return f.l.Lock(ctx, key)
}

func (f *failing) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return f.l.TryLock(ctx, key)
}

// TestTheBackendFailing: a backend that does not answer is tried again
// after a while (not in a tight loop), said once in the log, and the job
// runs once it answers; a key the backend refuses, or a closed Locker,
// ends Run with the error at once.
func TestTheBackendFailing(t *testing.T) {
	leakCheck(t)
	t.Run("unavailable", func(t *testing.T) {
		var out logs
		down := fmt.Errorf("%w: dial tcp 127.0.0.1:1: connection refused", lock.ErrUnavailable)
		f := &failing{l: memlock.New(memlock.NewServer(), lock.Options{TTL: time.Minute}), errs: []error{down, down, down}}
		rs := newRuns()
		began := time.Now()
		start(t, New(f, "sweep", rs.job("a", nil), Options{Interval: time.Hour, Logger: out.logger(), MinRetry: 20 * time.Millisecond}))
		rs.next(t, "a run once the backend answers", 10*time.Second)
		if n := f.calls.Load(); n != 4 {
			t.Errorf("Lock was called %d times, want 4 (3 failures, then the lease)", n)
		}
		if waited := time.Since(began); waited < 3*20*time.Millisecond {
			t.Errorf("the first run came %v after 3 failures, want at least 3 × MinRetry (60ms): retried in a tight loop", waited)
		}
		log := out.String()
		if n := strings.Count(log, "cannot take the lock"); n != 1 {
			t.Errorf("the log says %d times that the lock cannot be taken, want once:\n%s", n, log)
		}
		if !strings.Contains(log, "connection refused") || !strings.Contains(log, "answers again") {
			t.Errorf("the log does not give the failure and the recovery:\n%s", log)
		}
	})
	for _, fatal := range []error{lock.ErrInvalidKey, lock.ErrClosed} {
		t.Run(fatal.Error(), func(t *testing.T) {
			f := &failing{l: memlock.New(memlock.NewServer(), lock.Options{}), errs: []error{fatal, fatal}}
			r := New(f, "sweep", func(context.Context, lock.Fence) error { return nil }, Options{MinRetry: time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.Run(ctx); !errors.Is(err, fatal) || ctx.Err() != nil {
				t.Errorf("Run with Lock failing with %v = %v (ctx %v), want that error at once", fatal, err, ctx.Err())
			}
			if n := f.calls.Load(); n != 1 {
				t.Errorf("Lock was called %d times, want once", n)
			}
		})
	}
}

// TestBounds: the documented bounds with the service's defaults
// (INVENTORY_LOCK_TTL 30s, INVENTORY_ORDER_SWEEP_INTERVAL 1s).
func TestBounds(t *testing.T) {
	if got, want := TakeoverBound(30*time.Second), 31*time.Second; got != want {
		t.Errorf("TakeoverBound(30s) = %v, want %v", got, want)
	}
	if got, want := MaxGap(30*time.Second, time.Second), 32*time.Second; got != want {
		t.Errorf("MaxGap(30s, 1s) = %v, want %v", got, want)
	}
}
