package jobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"runtime/debug"
	"sync/atomic"
	"time"

	"inventory/internal/lock"
)

// Job is the work a Runner runs. ctx is the lease's Context: the job must
// return soon after it ends (the lease was lost, or the Runner is
// stopping), and it should do its writes under it. fence is the lease's
// fencing token: write it with the work, in the same transaction, and have
// the storage refuse a token below the highest it has seen for this job.
type Job func(ctx context.Context, fence lock.Fence) error

// Outcomes of a run, the outcome label of the run metrics.
const (
	OutcomeOK      = "ok"      // the job returned nil
	OutcomeFailed  = "failed"  // the job returned an error (or panicked) while the lease held
	OutcomeLost    = "lost"    // the job returned an error after its lease was lost under it
	OutcomeStopped = "stopped" // the job returned an error after Run's ctx ended
)

// ErrRunning is Run's error when the Runner is running already: runs of
// one Runner never overlap, and two Runs of one Runner would.
var ErrRunning = errors.New("jobs: runner already running")

// TakeoverSlack is how long, at most, a waiting Runner of any of the
// project's lock backends takes to get the lock once the dead holder's
// lease has ended on the backend's server, and to start its first run: a
// redislock waiter times its next try to the key's remaining TTL and
// waits at most its PollInterval (1s by default), a pglock waiter at most
// its MaxBackoff (32ms), and etcd's and ZooKeeper's are told by a watch.
const TakeoverSlack = time.Second

// TakeoverBound is how long after a Runner's death (killed, or cut off from
// the lock's servers) another Runner, waiting while the backend answers,
// starts its first run, for a lock whose lease time is ttl
// (INVENTORY_LOCK_TTL): the dead holder's lease ends on the server at most
// ttl after its last acquisition or renewal, the waiter gets the lock
// within TakeoverSlack of that, and a new holder runs the job at once. A
// holder that stops cleanly releases its lease, and another runs the job
// within the backend's wake-up time (milliseconds), not this bound.
func TakeoverBound(ttl time.Duration) time.Duration { return ttl + TakeoverSlack }

// MaxGap is the longest between the starts of two consecutive runs across
// the Runners of one job, while one of them lives and the backend answers:
// interval + TakeoverBound(ttl), a holder dying just before its next run.
// A run longer than interval adds what it takes beyond interval.
func MaxGap(ttl, interval time.Duration) time.Duration { return interval + TakeoverBound(ttl) }

// Options configure a Runner. The zero value works.
type Options struct {
	// Name names the job in logs and metrics (the task label); default:
	// the lock key.
	Name string
	// Interval is how often the holder runs the job; default 1s. A new
	// holder runs it at once.
	Interval time.Duration
	// Logger gets the runs that fail, the leases taken, lost and released;
	// nil: slog.Default().
	Logger *slog.Logger
	// Metrics records the runs, the lag, the takeovers and whether this
	// replica runs the job; nil: none.
	Metrics *Metrics
	// ReleaseTimeout bounds the release of a lease; default 5s (the lock's
	// server frees it at its TTL at the latest).
	ReleaseTimeout time.Duration
	// MinRetry and MaxRetry bound the jittered exponential wait before
	// trying the lock again after the backend failed (lock.ErrUnavailable
	// and the like, not a wait budget running out); defaults 100ms and 5s.
	MinRetry, MaxRetry time.Duration
}

// withDefaults is o with the documented defaults in its zero fields.
func (o Options) withDefaults(key string) Options {
	if o.Name == "" {
		o.Name = key
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReleaseTimeout <= 0 {
		o.ReleaseTimeout = 5 * time.Second
	}
	if o.MinRetry <= 0 {
		o.MinRetry = 100 * time.Millisecond
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 5 * time.Second
	}
	o.MaxRetry = max(o.MaxRetry, o.MinRetry)
	return o
}

// Runner runs one job on one replica at a time: see the package doc.
type Runner struct {
	locker  lock.Locker
	key     string
	job     Job
	opts    Options
	log     *slog.Logger
	series  *series // nil: no metrics
	owner   string
	running atomic.Bool
}

// New returns a Runner of job that takes the lock key from l. Give every
// replica's Runner of a job the same key, on the same backend.
func New(l lock.Locker, key string, job Job, o Options) *Runner {
	o = o.withDefaults(key)
	r := &Runner{
		locker: l, key: key, job: job, opts: o,
		log: o.Logger.With("job", o.Name, "lock_key", key),
		// An owner of its own, so that a re-entrant lock (which lets an
		// owner in again) never lets two Runners of one process in at once.
		owner: "job-runner-" + rand.Text(),
	}
	if o.Metrics != nil {
		r.series = o.Metrics.task(o.Name)
	}
	return r
}

// Run contends for the lock and, while it holds it, runs the job every
// Interval, until ctx ends; then it releases the lock and returns nil. It
// returns an error at once when the lock cannot ever be had (a key the
// backend refuses, a closed Locker) and ErrRunning when the Runner runs
// already.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer r.running.Store(false)
	ctx = lock.WithOwner(ctx, r.owner)
	stayed := false // the last lease was ours: winning the next wait keeps the job here
	for {
		lease, tookOver, err := r.acquire(ctx, stayed)
		if err != nil {
			return err
		}
		if lease == nil {
			return nil // ctx ended
		}
		r.hold(ctx, lease, tookOver)
		if ctx.Err() != nil {
			return nil
		}
		stayed = true
	}
}

// acquire waits for the lock, over as many wait budgets as it takes, and
// returns the lease and whether it is a takeover: the job comes to this
// replica from another, or at the start. It is not when the replica's own
// lease just ended (stayed) and it won the lock back within its first wait
// budget: a lock without renewal ends every lease at its TTL, and the job
// stays. It returns no lease and no error once ctx ended, and an error
// when the lock cannot ever be had.
func (r *Runner) acquire(ctx context.Context, stayed bool) (lock.Lease, bool, error) {
	retry := newBackoff(r.opts.MinRetry, r.opts.MaxRetry)
	failing := false
	for {
		lease, err := r.locker.Lock(ctx, r.key)
		if ctx.Err() == nil && failing && (err == nil || errors.Is(err, lock.ErrTimeout)) {
			r.log.Info("job: the lock's backend answers again")
			failing = false
			retry = newBackoff(r.opts.MinRetry, r.opts.MaxRetry)
		}
		if err == nil {
			return lease, !stayed, nil
		}
		if ctx.Err() != nil {
			return nil, false, nil
		}
		stayed = false
		switch {
		case errors.Is(err, lock.ErrTimeout):
			// Another replica holds it: wait again, at once, so that
			// this one is waiting whenever the holder goes.
			continue
		case errors.Is(err, lock.ErrInvalidKey), errors.Is(err, lock.ErrClosed):
			return nil, false, fmt.Errorf("job %s: take lock %q: %w", r.opts.Name, r.key, err)
		}
		// The backend failed to answer (or a lease ended while waiting):
		// try again after a while, not in a tight loop.
		d := retry.next()
		if !failing {
			r.log.Warn("job: cannot take the lock; trying again", "err", err, "retry_in", d)
			failing = true
		}
		if !waitUntil(ctx.Done(), time.Now().Add(d)) {
			return nil, false, nil
		}
	}
}

// hold runs the job under lease every Interval, the first at once, until
// the lease ends (lost, or Run's ctx ended), and then releases it.
func (r *Runner) hold(ctx context.Context, lease lock.Lease, tookOver bool) {
	fence := lease.Fence()
	log := r.log.With("fence", fence.Token)
	if tookOver {
		log.Info("job: this replica runs it now")
	} else {
		log.Debug("job: lock taken again")
	}
	r.series.holding(true, tookOver)
	defer func() {
		r.series.holding(false, false)
		r.release(ctx, lease, log)
	}()

	due := time.Now() // the tick this run belongs to
	lagFrom := due    // the earliest tick it makes up for
	for {
		if !waitUntil(lease.Done(), due) {
			return
		}
		// Err also sees a validity deadline that passed while this
		// process was paused, before the lease's own timer has fired.
		if ctx.Err() != nil || lease.Err() != nil {
			return
		}
		start := time.Now()
		err := r.runOnce(lease)
		end := time.Now()
		took := end.Sub(start)
		outcome := r.outcome(ctx, lease, err)
		r.series.ran(outcome, start.Sub(lagFrom), took)
		switch outcome {
		case OutcomeFailed:
			log.Warn("job: run failed", "err", err, "took", took)
		case OutcomeLost:
			log.Warn("job: lease lost during a run", "err", err, "cause", lease.Err(), "took", took)
		}
		due, lagFrom = nextTick(due, start, end, r.opts.Interval)
	}
}

// nextTick is when the run after one due at due, which ran from start to
// end, is due: the first tick (due + k·interval) after end, so that runs
// never come back to back; and the tick its lag counts from: the first
// after start, the earliest the run that started then did not cover. A
// run that started late (a slow wake-up, a pause) therefore covers the
// ticks it was late for, and one that overran leaves the ticks it ran
// through to the next, which counts them as lag.
func nextTick(due, start, end time.Time, interval time.Duration) (next, lagFrom time.Time) {
	after := func(t time.Time) time.Time {
		return due.Add((max(t.Sub(due), 0)/interval + 1) * interval)
	}
	return after(end), after(start)
}

// runOnce runs the job once with the lease's context and fence; a panic
// is the run's error, so that one bad run does not take the replica down.
func (r *Runner) runOnce(lease lock.Lease) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("job %s panicked: %v\n%s", r.opts.Name, p, debug.Stack())
		}
	}()
	return r.job(lease.Context(), lease.Fence())
}

// outcome classifies a run that returned err under lease.
func (r *Runner) outcome(ctx context.Context, lease lock.Lease, err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case ctx.Err() != nil:
		return OutcomeStopped
	case lease.Err() != nil:
		return OutcomeLost
	}
	return OutcomeFailed
}

// release gives the lease up, with a context of its own: Run's may have
// ended (stopping is when releasing matters most, so that another replica
// takes over at once), and the owner travels with it.
func (r *Runner) release(ctx context.Context, lease lock.Lease, log *slog.Logger) {
	lost := lease.Err() // nil while it holds: Run's ctx ending is no loss
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.ReleaseTimeout)
	defer cancel()
	err := lease.Release(rctx)
	stopping := ctx.Err() != nil
	switch {
	case errors.Is(lost, lock.ErrExpired):
		// A lock without renewal ends every lease so, at its TTL; a
		// renewing one only when its renewals failed until then.
		log.Info("job: lease ended at its validity deadline", "cause", lost, "stopping", stopping)
	case lost != nil || errors.Is(err, lock.ErrLost):
		log.Warn("job: lease lost", "cause", cmp.Or(lost, err), "stopping", stopping)
	case errors.Is(err, lock.ErrReleaseUnknown):
		log.Warn("job: lock release outcome unknown; its server frees it at its TTL", "err", err)
	case err != nil:
		log.Warn("job: lock release failed", "err", err)
	case stopping:
		log.Info("job: stopped; lock released")
	}
}

// backoff yields jittered exponential waits: the n-th is uniform in
// [min, min(max, min·2ⁿ)].
type backoff struct{ min, max, ceil time.Duration }

func newBackoff(lo, hi time.Duration) backoff { return backoff{min: lo, max: hi, ceil: lo} }

func (b *backoff) next() time.Duration {
	d := b.min
	if span := b.ceil - b.min; span > 0 {
		d += mrand.N(span + 1)
	}
	b.ceil = min(2*b.ceil, b.max)
	return d
}

// waitUntil waits until t or until done is closed, and reports whether t
// came first (or had passed already).
func waitUntil(done <-chan struct{}, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return false
	case <-timer.C:
		return true
	}
}
