package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/backend"
	"inventory/internal/lock/backends"
	"inventory/internal/lock/breaker"
	"inventory/internal/lock/etcdlock/etcdbreak"
	"inventory/internal/lock/redislock/redisbreak"
	"inventory/internal/testenv"
	"inventory/migrations"
)

// backendCase is a lock a Runner is tested on: a backend of the one list
// (backends.All), opened by its Descriptor as the service opens it, and
// one kind of its locks.
type backendCase struct {
	name    string // names the case (and the child process's backend)
	backend string // backend.Descriptor.Name
	kind    string // the kind of lock (backend.Lockers.Locker)
	// breaker takes a holder's lock behind its back, as lock-expired-early
	// does; nil: the case's holder is not told of that (it has no watch or
	// watchdog), and it is left out of the loss test.
	breaker *breaker.Breaker
}

// cases are the locks the Runner is tested on: Redis's plain lock (no
// renewal: every lease ends at its TTL) and its re-entrant one (renewed
// every TTL/3 by a watchdog, which also finds the key gone), pglock (a
// row in Postgres, no renewal) and etcd (a session kept alive, a watch
// on the key).
var cases = []backendCase{
	{name: "redislock", backend: "redislock"},
	{name: "redislock-reentrant", backend: "redislock", kind: "reentrant", breaker: &redisbreak.Breaker},
	{name: "pglock", backend: "pglock"},
	{name: "etcdlock", backend: "etcdlock", breaker: &etcdbreak.Breaker},
}

func caseNamed(name string) (backendCase, bool) {
	i := slices.IndexFunc(cases, func(c backendCase) bool { return c.name == name })
	if i < 0 {
		return backendCase{}, false
	}
	return cases[i], true
}

// servers are where a case's locks live, as the service is told:
// breaker.Servers, which a child process gets encoded.
type servers breaker.Servers

func (s servers) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

func decodeServers(v string) (servers, error) {
	var s servers
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return s, fmt.Errorf("servers %q: %w", v, err)
	}
	return s, nil
}

// descriptor is c's backend in the one list.
func (c backendCase) descriptor() (backend.Descriptor, error) {
	all := backends.All()
	i := slices.IndexFunc(all, func(d backend.Descriptor) bool { return d.Name == c.backend })
	if i < 0 {
		return backend.Descriptor{}, fmt.Errorf("no lock backend %q in backends.All", c.backend)
	}
	return all[i], nil
}

// newServers gives the test the servers c's locks need: the binary's
// Redis (flushed), a migrated database of its own, the backend's shared
// servers.
func newServers(t *testing.T, c backendCase) servers {
	t.Helper()
	d, err := c.descriptor()
	if err != nil {
		t.Fatal(err)
	}
	s := servers{Settings: map[string]string{}}
	switch {
	case d.Setting != "":
		s.Settings[d.Setting] = testenv.LockServer(t, d.Setting, d.Server)
	case c.backend == "pglock":
		s.Postgres = testenv.PostgresURL(t)
		pool, err := pgxpool.New(t.Context(), s.Postgres)
		if err != nil {
			t.Fatalf("pgxpool.New: %v", err)
		}
		defer pool.Close()
		db := stdlib.OpenDBFromPool(pool)
		defer db.Close()
		if err := migrations.Up(t.Context(), db); err != nil {
			t.Fatalf("migrations.Up: %v", err)
		}
	default:
		s.Redis = testenv.RedisURL(t)
	}
	return s
}

// open opens c's backend on srv with connections of its own, as one
// replica of the service does, and returns one of its Lockers and what
// closes it all.
func (c backendCase) open(ctx context.Context, srv servers, o lock.Options) (lock.Locker, func(), error) {
	d, err := c.descriptor()
	if err != nil {
		return nil, nil, err
	}
	cfg := backend.Config{Setting: srv.Settings[d.Setting], Options: o}
	var closes []func()
	closeAll := func() {
		for _, f := range slices.Backward(closes) {
			f()
		}
	}
	if srv.Postgres != "" {
		pool, err := pgxpool.New(ctx, srv.Postgres)
		if err != nil {
			return nil, nil, err
		}
		closes = append(closes, pool.Close)
		cfg.Postgres = pool
	}
	if srv.Redis != "" {
		opts, err := redis.ParseURL(srv.Redis)
		if err != nil {
			return nil, nil, err
		}
		rdb := redis.NewClient(opts)
		closes = append(closes, func() { _ = rdb.Close() })
		cfg.Redis = rdb
	}
	opened, err := d.Open(ctx, cfg)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("open %s: %w", d.Name, err)
	}
	closes = append(closes, opened.Close)
	l, err := opened.Locker(c.kind)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return l, closeAll, nil
}

// replica is a Locker of c on srv with connections of its own, closed
// when the test ends (after the Runners started later have stopped).
func replica(t *testing.T, c backendCase, srv servers, o lock.Options) lock.Locker {
	t.Helper()
	l, closeAll, err := c.open(t.Context(), srv, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	return l
}

// nextOf waits up to limit for the next run of runner to start, passing
// over the others'.
func (rs *runs) nextOf(t *testing.T, runner, what string, limit time.Duration) run {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := rs.next(t, what, time.Until(deadline))
		if r.runner == runner {
			return r
		}
	}
}

// noOverlap fails t for each run that started before an earlier-started
// run (of any runner) had ended.
func noOverlap(t *testing.T, all []run) {
	t.Helper()
	all = slices.Clone(all)
	slices.SortFunc(all, func(a, b run) int { return a.start.Compare(b.start) })
	for i := 1; i < len(all); i++ {
		last := slices.MaxFunc(all[:i], func(a, b run) int { return a.end.Compare(b.end) })
		if all[i].start.Before(last.end) {
			t.Errorf("%s's run (fence %d) started %v before %s's run (fence %d) ended: two runs at once",
				all[i].runner, all[i].fence.Token, last.end.Sub(all[i].start), last.runner, last.fence.Token)
		}
	}
}

// TestOneRunnerAtATime: three replicas' Runners contend for one job; the
// holder runs it a few times and then stops cleanly, four times over, and
// a fresh Runner joins each time. No two runs of any Runners overlap (by
// the runs' start and end times); the fence grows at each change of
// holder and stays the same under one lease; and each clean stop hands
// the job over at once: another Runner's first run comes within
// TakeoverSlack of the stop, where the lock's TTL (20s) is what it would
// take without the release.
func TestOneRunnerAtATime(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServers(t, c)
			leakCheck(t)
			const key = "lock:{job-one-at-a-time}"
			o := lock.Options{TTL: 20 * time.Second, Wait: 300 * time.Millisecond}
			rs := newRuns()
			runners := map[string]*started{}
			joined := 0
			join := func() {
				joined++
				name := fmt.Sprintf("r%d", joined)
				job := rs.job(name, func(ctx context.Context, _ int) error { return work(ctx, 2*time.Millisecond) })
				runners[name] = start(t, New(replica(t, c, srv, o), key, job, Options{Interval: 10 * time.Millisecond}))
			}
			for range 3 {
				join()
			}
			holder := rs.next(t, "the first run", 30*time.Second).runner
			var handovers []time.Duration
			for range 4 {
				for seen := 1; seen < 3; seen++ {
					if r := rs.next(t, "the holder's next run", 30*time.Second); r.runner != holder {
						t.Fatalf("%s ran while %s held the lock, which had not stopped", r.runner, holder)
					}
				}
				stopped := time.Now()
				if err := runners[holder].stop(t); err != nil {
					t.Errorf("%s: Run = %v, want nil once its ctx ended", holder, err)
				}
				delete(runners, holder)
				var next run
				for next = rs.next(t, "another runner's run after the holder stopped", 30*time.Second); next.runner == holder; {
					next = rs.next(t, "another runner's run after the holder stopped", 30*time.Second)
				}
				handovers = append(handovers, next.start.Sub(stopped))
				holder = next.runner
				join()
			}
			// The waiting Runners first: stopped before it, none can take
			// the job over from the holder.
			for name, s := range runners {
				if name != holder {
					s.stop(t)
				}
			}
			runners[holder].stop(t)

			all := rs.snapshot()
			noOverlap(t, all)
			slices.SortFunc(all, func(a, b run) int { return a.start.Compare(b.start) })
			holders := map[string]bool{}
			for i, r := range all {
				holders[r.runner] = true
				if i == 0 {
					continue
				}
				prev := all[i-1]
				switch {
				case r.fence.Backend != prev.fence.Backend:
					t.Errorf("fence counter changed from %q to %q", prev.fence.Backend, r.fence.Backend)
				case r.runner != prev.runner && r.fence.Token <= prev.fence.Token:
					t.Errorf("%s ran with fence %d after %s with %d: want a larger fence for each new holder", r.runner, r.fence.Token, prev.runner, prev.fence.Token)
				case r.runner == prev.runner && r.fence != prev.fence:
					t.Errorf("%s ran with fence %d, then %d, without giving up the lock", r.runner, prev.fence.Token, r.fence.Token)
				}
			}
			if len(holders) != 5 {
				t.Errorf("%d runners ran the job, want 5 (the first holder and 4 takeovers)", len(holders))
			}
			for i, d := range handovers {
				if d > TakeoverSlack {
					t.Errorf("handover %d after a clean stop took %v, want at most TakeoverSlack (%v): was the lock released?", i+1, d, TakeoverSlack)
				}
			}
			t.Logf("%d runs; handovers after a clean stop: %v", len(all), handovers)
		})
	}
}

// counting is a Locker that counts its Lock calls.
type counting struct {
	lock.Locker
	locks atomic.Int64
}

func (c *counting) Lock(ctx context.Context, key string) (lock.Lease, error) {
	c.locks.Add(1)
	return c.Locker.Lock(ctx, key)
}

// TestAKilledRunnerIsTakenOverWithinTheBound: the holder is a child
// process running the job; once a second Runner has waited for the lock
// (one of its Lock calls timed out), the child is killed with SIGKILL,
// releasing nothing. The survivor's first run comes within
// TakeoverBound(TTL) of the kill and no sooner than half the TTL after
// it (the dead lease had to expire: nothing released it), with a fence
// above every one the child ran with.
func TestAKilledRunnerIsTakenOverWithinTheBound(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServers(t, c)
			leakCheck(t)
			const key = "lock:{job-killed}"
			const interval = 50 * time.Millisecond
			o := lock.Options{TTL: 2 * time.Second, Wait: 300 * time.Millisecond}
			ch := startChild(t, c, srv, key, o, interval)
			ch.next(t, "the child's first run", 30*time.Second)

			m, _ := newMetrics()
			l := &counting{Locker: replica(t, c, srv, o)}
			rs := newRuns()
			start(t, New(l, key, rs.job("survivor", nil), Options{Interval: interval, Metrics: m}))
			testenv.WaitFor(t, "the survivor's first wait for the lock to time out", 30*time.Second, func() bool { return l.locks.Load() >= 2 })
			if r := rs.snapshot(); len(r) > 0 {
				t.Fatalf("the survivor ran (fence %d) while the child held the lock", r[0].fence.Token)
			}

			last := ch.next(t, "the child's next run", 30*time.Second).fence
			killed := ch.kill(t)
			for len(ch.runs) > 0 { // what it printed before it died
				last = (<-ch.runs).fence
			}
			r := rs.next(t, "the survivor's first run", TakeoverBound(o.TTL)+30*time.Second)
			gap := r.start.Sub(killed)
			t.Logf("the survivor's first run came %v after the kill (TTL %v, bound %v); fence %d after the child's %d",
				gap.Round(time.Millisecond), o.TTL, TakeoverBound(o.TTL), r.fence.Token, last.Token)
			if gap > TakeoverBound(o.TTL) {
				t.Errorf("takeover took %v, want at most TakeoverBound(%v) = %v", gap, o.TTL, TakeoverBound(o.TTL))
			}
			if gap < o.TTL/2 {
				t.Errorf("takeover took %v, less than half the TTL: the killed holder's lock did not have to expire", gap)
			}
			if r.fence.Backend != last.Backend || r.fence.Token <= last.Token {
				t.Errorf("survivor's fence = %+v, want one above the child's last, %+v", r.fence, last)
			}
			if v := metric(t, m, "takeovers", key); v != 1 {
				t.Errorf("survivor's inventory_job_takeovers_total = %v, want 1", v)
			}
		})
	}
}

// TestALeaseLostUnderARunCancelsIt: the holder's lock is taken behind its
// back in the middle of a run, as lock-expired-early takes it (the Redis
// key deleted, the etcd key deleted). The lease's watchdog or watch tells
// the holder: the run's ctx is cancelled with a cause wrapping
// lock.ErrLost, and the run counts as lost. The waiting Runner takes over
// with a larger fence; it may start before the old holder has noticed,
// which is why the job's writes carry the fence.
func TestALeaseLostUnderARunCancelsIt(t *testing.T) {
	for _, c := range cases {
		if c.breaker == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			srv := newServers(t, c)
			leakCheck(t)
			const key = "lock:{job-lost}"
			const interval = 50 * time.Millisecond
			o := lock.Options{TTL: 3 * time.Second, Wait: 300 * time.Millisecond}
			rs := newRuns()
			m, _ := newMetrics()
			jobA := rs.job("a", func(ctx context.Context, n int) error {
				if n == 1 {
					<-ctx.Done() // the first run lasts until its lease is lost
					return context.Cause(ctx)
				}
				return nil
			})
			start(t, New(replica(t, c, srv, o), key, jobA, Options{Interval: interval, Metrics: m}))
			a := rs.nextOf(t, "a", "a's first run", 30*time.Second)
			start(t, New(replica(t, c, srv, o), key, rs.job("b", nil), Options{Interval: interval}))

			locks, ok, err := c.breaker.Open(t.Context(), breaker.Servers(srv))
			if err != nil || !ok {
				t.Fatalf("%s breaker: Open = %v, %v", c.backend, ok, err)
			}
			defer locks.Close()
			h, held, err := locks.Holder(t.Context(), key)
			if err != nil || !held {
				t.Fatalf("%s breaker: Holder(%q) = %v, %v; want a's hold", c.backend, key, held, err)
			}
			// a's Lock returned before its run began, so h has long been
			// the holder (Holder.Settle).
			taken := time.Now()
			if ok, err := h.Take(t.Context()); err != nil || !ok {
				t.Fatalf("%s breaker: Take = %v, %v", c.backend, ok, err)
			}

			b := rs.nextOf(t, "b", "b's first run after a lost the lock", 30*time.Second)
			if b.fence.Backend != a.fence.Backend || b.fence.Token <= a.fence.Token {
				t.Errorf("b's fence = %+v, want one above a's, %+v", b.fence, a.fence)
			}
			var lost run
			testenv.WaitFor(t, "a's first run to end", o.TTL+30*time.Second, func() bool {
				i := slices.IndexFunc(rs.snapshot(), func(r run) bool { return r.runner == "a" })
				if i >= 0 {
					lost = rs.snapshot()[i]
				}
				return i >= 0
			})
			t.Logf("a's run was cancelled %v after its lock was taken; b's first run came %v after it",
				lost.end.Sub(taken).Round(time.Millisecond), b.start.Sub(taken).Round(time.Millisecond))
			if !errors.Is(lost.cause, lock.ErrLost) {
				t.Errorf("a's run ended with its ctx's cause %v, want one wrapping lock.ErrLost", lost.cause)
			}
			// The Runner counts the run once the job has returned.
			testenv.WaitFor(t, "a's run to be counted as lost", 10*time.Second, func() bool { return metric(t, m, "runs", key, OutcomeLost) == 1 })
		})
	}
}

// TestAPausedRunnerStartsNoRunOnItsOldLease is replica-pause on the
// runner: the holder, a child process, is stopped (SIGSTOP) while a second
// Runner waits; the second takes over once the paused one's lease has
// expired on the server, and then the child is continued (SIGCONT). The
// child must notice that its lease is gone and start no run under it: its
// timers are all overdue when it wakes, and the one for the next run may
// fire before the lease's, so the Runner checks the lease before each
// run. (A run in flight at the pause would go on writing: that is for the
// fence to refuse, and the lead's fault cells to show.)
func TestAPausedRunnerStartsNoRunOnItsOldLease(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServers(t, c)
			leakCheck(t)
			const key = "lock:{job-paused}"
			const interval = 20 * time.Millisecond
			o := lock.Options{TTL: 2 * time.Second, Wait: 300 * time.Millisecond}
			ch := startChild(t, c, srv, key, o, interval)
			ch.next(t, "the child's first run", 30*time.Second)

			l := &counting{Locker: replica(t, c, srv, o)}
			rs := newRuns()
			start(t, New(l, key, rs.job("survivor", nil), Options{Interval: interval}))
			testenv.WaitFor(t, "the survivor's first wait for the lock to time out", 30*time.Second, func() bool { return l.locks.Load() >= 2 })
			paused := ch.signal(t, syscall.SIGSTOP)
			r := rs.next(t, "the survivor's first run", TakeoverBound(o.TTL)+30*time.Second)
			resumed := ch.signal(t, syscall.SIGCONT)
			testenv.WaitFor(t, "the child to log that its lease ended", 30*time.Second, func() bool {
				return ch.saidSince(resumed, `msg="job: lease`)
			})
			t.Logf("paused %v; the survivor ran %v after the pause with fence %d", time.Since(paused).Round(time.Millisecond),
				r.start.Sub(paused).Round(time.Millisecond), r.fence.Token)
			for len(ch.runs) > 0 {
				if cr := <-ch.runs; cr.start.After(resumed) {
					t.Errorf("the child started a run with fence %d after it was continued, while the survivor (fence %d) held the lock", cr.fence.Token, r.fence.Token)
				}
			}
		})
	}
}
