package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
	"inventory/internal/lock/localqueue"
)

// cleanupTimeout bounds the best-effort delete after an acquire whose
// outcome is unknown; the delete goes on in the background (see
// lock.Cleanups), and Close waits for it.
const cleanupTimeout = 2 * time.Second

// withDefaults fills the documented defaults into the zero fields.
func (o Options) withDefaults() Options {
	o.Options = o.WithDefaults()
	o.TTL = max(o.TTL, 3*time.Millisecond) // PX is in milliseconds; the watchdog ticks at TTL/3
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 32 * time.Millisecond
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o
}

type nopObserver struct{}

func (nopObserver) Acquired(string, error, time.Duration, int) {}
func (nopObserver) Renewed(string, error)                      {}
func (nopObserver) Lost(string, error)                         {}
func (nopObserver) Released(string, time.Duration, error)      {}

// newToken returns a random token of fixed length (26 characters).
func newToken() string { return rand.Text() }

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// Mutex is an exclusive Redis lock: SET key token NX PX ttl (in a script
// that also mints the fencing token), released by compare-and-delete.
// Create one per process and share it; it is safe for concurrent use.
type Mutex struct{ base }

// NewMutex returns a Mutex over rdb; see Options for the defaults.
func NewMutex(rdb redis.UniversalClient, opts Options) *Mutex {
	return &Mutex{newBase(rdb, opts)}
}

// base is what a Mutex, Reentrant and Fair lock are built on: the client,
// the options with their defaults, the subscription that wakes waiters,
// the local turns and the cleanups that outlive their calls.
type base struct {
	rdb      redis.UniversalClient
	opts     Options
	notify   *notifier // nil when PollOnly
	cleanups *lock.Cleanups
	// turns queues the Lock calls of one key in this process, so that one
	// of them at a time contends in Redis (a Mutex's and a Reentrant's;
	// a Fair lock's waiters queue in Redis, in arrival order across
	// processes, which a local queue would break).
	turns *localqueue.Queues
}

func newBase(rdb redis.UniversalClient, opts Options) base {
	b := base{rdb: rdb, opts: opts.withDefaults(), cleanups: &lock.Cleanups{}, turns: &localqueue.Queues{}}
	if !b.opts.PollOnly {
		b.notify = newNotifier(rdb)
	}
	return b
}

// close stops the subscription and waits for the cleanups in flight.
func (b *base) close() {
	b.notify.close()
	b.cleanups.Wait()
}

// Close stops the subscription that wakes waiters, if one is running (it
// also stops by itself a few seconds after the last waiter), and waits for
// its goroutine to exit and for the deletes still running after acquires
// of unknown outcome (each at most 2s). The Mutex stays usable: held
// leases can be released, and later waiters poll.
func (m *Mutex) Close() { m.close() }

// Lock acquires key, waiting while it is held (behind this Mutex's earlier
// Lock calls of key, in memory, then in Redis) until a release notice (or,
// when that is lost, a timed retry) lets it try again, for at most
// Options.Wait and never past ctx. Giving up returns
// *lock.Error wrapping lock.ErrTimeout and ctx.Err() (or context.DeadlineExceeded for
// the Wait budget); a Redis failure returns *lock.Error wrapping it.
func (m *Mutex) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, m.opts.Observer, key, "lock", true, m.attempt)
}

// TryLock makes one attempt and never waits: *lock.Error wrapping lock.ErrNotAcquired
// if key is held (lock.ErrTimeout wrapping ctx.Err() if ctx is already done).
func (m *Mutex) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, m.opts.Observer, key, "trylock", false, m.attempt)
}

func (m *Mutex) attempt(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	fk, err := fenceKey(key)
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
	}
	ch, err := releaseChannel(key)
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
	}
	keys := []string{key, fk}
	token := newToken()
	var renew func(context.Context) (bool, error)
	if m.opts.Watchdog {
		renew = func(ctx context.Context) (bool, error) {
			v, _, err := redisscript.Run(ctx, m.rdb, mutexRenew, keys[:1], token, ms(m.opts.TTL))
			return v == int64(1), err
		}
	}
	// One budget for the whole call: the turn, then the lock.
	wctx, cancel := m.opts.WaitContext(ctx, wait)
	defer cancel()
	leave, err := m.turn(wctx, op, key, wait)
	if err != nil {
		return nil, err
	}
	h := newHold(Backend, key, token, &m.opts, renew)
	fence, sent, err := grant(wctx, &m.opts, op, key, wait, trips, m.notify, m.cleanups, ch,
		func(ctx context.Context, floor string) (any, int, error) {
			return redisscript.Run(ctx, m.rdb, mutexAcquire, keys, token, ms(m.opts.TTL), floor)
		},
		func(ctx context.Context) { _, _, _ = redisscript.Run(ctx, m.rdb, mutexRelease, keys, token, ch) })
	if err != nil {
		leave()
		return nil, err
	}
	h.leave = leave
	h.arm(sent, fence)
	return h.addLease(ctx, func(ctx context.Context, l *Lease) error {
		return m.release(ctx, l, mutexRelease, keys, token, ch)
	}), nil
}

// turn waits, for a Lock (wait), until the caller is first among this
// process's Lock calls of key, for at most wctx: only the first contends in
// Redis, the others wait here, in memory, instead of each making tries that
// can only lose to one another and waking to every release notice. A
// TryLock takes no turn. leave gives the turn to the next caller; the
// hold calls it when it ends (released or lost), a failed acquire at once.
func (b *base) turn(wctx context.Context, op, key string, wait bool) (leave func(), err error) {
	if !wait || b.opts.noTurns {
		return func() {}, nil
	}
	leave, err = b.turns.Wait(wctx, key)
	if err != nil {
		return nil, timeoutError(op, key, wctx)
	}
	return leave, nil
}

// release ends l's hold and frees the lock with script (which replies 1
// when it did): a Mutex's or a Fair lock's Release.
func (b *base) release(ctx context.Context, l *Lease, script *redis.Script, keys []string, args ...any) error {
	h := l.h
	// The hold ends first, so that a loss the clock proves by now reaches
	// the lease's context as a loss (end is idempotent: a second Release
	// only finds it ended).
	lost := h.end()
	if _, err := l.BeginRelease(); err != nil {
		return err
	}
	h.dropLease(l)
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	v, _, err := redisscript.Run(ctx, b.rdb, script, keys, args...)
	h.leaveTurn() // after the key is gone: the next local caller finds it free
	return l.EndRelease(l.ReleaseError(lost, err, v == int64(1)))
}

// grant runs an acquire script until it grants the lock, waiting between
// tries when wait is set: parked until a release notice on channel when
// notify is set (see notifier), else sleeping with backoff. try runs the
// script once with the given fence floor; cleanup removes our key after a
// try whose outcome is unknown, run by cl. It returns the fence and when
// the granting command was sent.
func grant(ctx context.Context, o *Options, op, key string, wait bool, trips *int, notify *notifier, cl *lock.Cleanups, channel string,
	try func(ctx context.Context, floor string) (any, int, error), cleanup func(context.Context)) (int64, time.Time, error) {
	floor := o.startFloor()
	wctx, cancel := o.WaitContext(ctx, wait)
	defer cancel()
	bo := newBackoff(o.MinBackoff, o.MaxBackoff)
	var w *waiter // joined after the first try that found the lock held
	defer func() {
		if w != nil {
			w.leave()
		}
	}()
	var timer *time.Timer
	defer func() { stopTimer(timer) }()
	lastTry := false
	for {
		r, sent, err := tryScript(wctx, o, op, key, &floor, trips, try, func() {
			// Delete our key (by token) rather than leave it until its TTL.
			*trips++
			cl.Run(wctx, func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(cleanupTimeout, o.TTL))
				defer cancel()
				cleanup(cctx)
			})
		})
		if err != nil {
			return 0, time.Time{}, err
		}
		if w != nil {
			w.tried()
		}
		switch {
		case r[0] == 1 && len(r) >= 2:
			return r[1], sent, nil
		case r[0] != 0:
			return 0, time.Time{}, &lock.Error{Backend: Backend, Op: op, Key: key, Err: fmt.Errorf("%w: %v", errUnexpectedReply, r)}
		}
		if !wait {
			return 0, time.Time{}, &lock.Error{Backend: Backend, Op: op, Key: key, Err: lock.ErrNotAcquired}
		}
		if w == nil && notify != nil {
			if w = notify.join(channel); w != nil && w.ready == nil {
				// Already subscribed, but the release may have come between
				// the try and joining: try again, now sure to hear the next.
				continue
			}
		}
		var d time.Duration
		if w != nil {
			var pttl time.Duration
			if len(r) >= 2 {
				pttl = time.Duration(r[1]) * time.Millisecond
			}
			d = w.pollDelay(o.PollInterval, pttl)
		} else {
			d = bo.next()
		}
		if dl, ok := wctx.Deadline(); ok && time.Until(dl) <= d {
			// Make one last timed try just before the budget ends rather
			// than give up early; after it only a notice brings another.
			rem := time.Until(dl)
			switch {
			case !lastTry:
				lastTry = true
				d = rem - min(rem/2, time.Millisecond)
			case w != nil:
				d = rem + time.Second // the budget ends first
			default: // the budget ends before another try could: let it run out
				<-wctx.Done()
				return 0, time.Time{}, timeoutError(op, key, wctx)
			}
		}
		if !waitForNextTry(wctx, w, &timer, d) {
			return 0, time.Time{}, timeoutError(op, key, wctx)
		}
	}
}

// tryScript makes one try of an acquire script, run with the fence floor,
// and returns its reply and when it was sent. It counts the round trips,
// calls unknown when the outcome is unknown (the script may have run and
// its reply been lost), and when the script asks for a floor (reply {-1}:
// no fencing counter, and floor is "") asks FenceFloor for one and runs
// the script again with it.
func tryScript(wctx context.Context, o *Options, op, key string, floor *string, trips *int,
	run func(ctx context.Context, floor string) (any, int, error), unknown func()) ([]int64, time.Time, error) {
	for {
		if wctx.Err() != nil {
			return nil, time.Time{}, timeoutError(op, key, wctx)
		}
		sent := time.Now()
		v, n, err := run(wctx, *floor)
		*trips += n
		if err != nil {
			if !redisscript.IsServerReply(err) {
				unknown()
			}
			return nil, time.Time{}, tryError(wctx, op, key, err)
		}
		r, err := redisscript.ReplyInts(v)
		if err != nil {
			return nil, time.Time{}, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
		}
		if r[0] != -1 || *floor != "" {
			return r, sent, nil
		}
		if *floor, err = askFloor(wctx, o, op, key); err != nil {
			return nil, time.Time{}, err
		}
	}
}

// startFloor is the acquire scripts' fence floor before the first try:
// "" (ask FenceFloor once a script finds no fencing counter), or "0"
// without a FenceFloor.
func (o *Options) startFloor() string {
	if o.FenceFloor == nil {
		return "0"
	}
	return ""
}

// askFloor asks FenceFloor for key's floor, as an acquire script's
// argument, once the script found no fencing counter.
func askFloor(wctx context.Context, o *Options, op, key string) (string, error) {
	f, err := o.FenceFloor(wctx, key)
	if err != nil {
		return "", tryError(wctx, op, key, fmt.Errorf("fence floor: %w", err))
	}
	if f < 0 {
		return "", &lock.Error{Backend: Backend, Op: op, Key: key, Err: fmt.Errorf("fence floor: %d is negative", f)}
	}
	return strconv.FormatInt(f, 10), nil
}

// tryError is the error of a try that failed with err, or giving up when
// the wait ran out meanwhile.
func tryError(wctx context.Context, op, key string, err error) error {
	if wctx.Err() != nil {
		return timeoutError(op, key, wctx)
	}
	return &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
}

// waitForNextTry waits d before the next try, or less when a notice to w
// (the key was released) comes first; with no waiter, for the timer
// alone. It waits on *timer (made at the first call; stop it with
// stopTimer) and reports false once wctx ended first.
func waitForNextTry(wctx context.Context, w *waiter, timer **time.Timer, d time.Duration) bool {
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d) // Go >= 1.23: no stale tick can be left in timer.C
	}
	if w != nil {
		return w.park(wctx, *timer)
	}
	return sleep(wctx, *timer)
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// timeoutError reports giving up: lock.ErrTimeout wrapping ctx's error.
func timeoutError(op, key string, ctx context.Context) error {
	cause := ctx.Err()
	if c := context.Cause(ctx); c != nil && !errors.Is(c, cause) {
		cause = fmt.Errorf("%w (%w)", cause, c)
	}
	return &lock.Error{Backend: Backend, Op: op, Key: key, Err: fmt.Errorf("%w: %w", lock.ErrTimeout, cause)}
}

var _ lock.Locker = (*Mutex)(nil)
