// Package pglock provides a lock table in Postgres whose leases end on
// Postgres' clock and carry fencing tokens that never go backwards.
//
// One row of the table locks (migrations/00003_locks.sql) per lock name:
//
//	name         the lock's name (a stock strategy uses lock:{sku})
//	token        the holder's random token; NULL when nobody holds it
//	expires_at   when the holder's lease ends, on Postgres' clock
//	fence        how many times the lock was granted: the fencing token
//	acquired_at  when the current holder got it, on Postgres' clock
//
// Acquire is one statement: insert the row, or take it over when it is free
// (released) or its lease has expired, adding one to fence; the row lock
// Postgres takes for the update serialises competing acquirers. Release
// clears the token only if it is still ours. The row is never deleted, so
// the fence survives releases and take-overs and only grows.
//
// This is the seeds' "database lock" done carefully. Their version puts the
// client's clock in expires_at (two replicas whose clocks disagree disagree
// about who holds the lock), never takes over an expired row (a crashed
// holder locks everybody out for good), treats every failed INSERT as
// "held" (a dropped connection looks like contention), and has no fencing
// token, so a holder that outlived its lease cannot be told apart from the
// one that took over.
//
// # Guarantees and limits
//
// Exclusion holds as long as holders are not paused past their lease and
// their clocks run at about the rate of Postgres': a lease's local deadline
// (Lease.Deadline, Lease.Context) is measured on the holder's monotonic
// clock from before the acquiring statement was sent, less a drift
// allowance, so it ends no later than the row's expires_at. There is no
// watchdog: a lease lasts TTL. A holder paused past its deadline (GC,
// SIGSTOP) may still act when it resumes; write Lease.Fence() with the
// protected data and have the storage refuse a fence older than the newest
// it has seen, as the stock strategies do. Rows deleted by hand restart the
// fence at 1.
//
// Within one process, Lock callers of the same name queue for their turn
// (package turn): only one of them at a time polls Postgres, and it keeps
// its turn while it holds the lock, so the next local waiter tries the
// moment the lock is released here. Across processes, the callers whose
// turn it is poll with jittered exponential backoff between
// Options.MinBackoff and MaxBackoff, each try one statement; the lock is
// not fair, and nothing wakes a waiter in another process on release
// (LISTEN/NOTIFY would; it is not built).
// TryLock does not queue. The package knows nothing of Redis or of stock.
//
// # Measured
//
// BenchmarkLock (go test -run '^$' -bench BenchmarkLock -benchtime 2s
// -count 2, here and in internal/lock/redislock for its Mutex, work=0s rows) on the
// 2-core development box, 2026-11-23: Postgres 15 and Redis 7.0 as local
// processes on loopback, the test Postgres with fsync and
// synchronous_commit off, two pools ("replicas"), empty critical section,
// default Options. Two sessions, each running the Mutex and then pglock,
// while other builds and tests shared the machine (load average 2–13), so
// the spread is wide; ranges over both runs of a session:
//
//	                          session 1 (polling Mutex)    session 2 (Mutex after notified waiting)
//	                          acq/s       p50 wait         acq/s                   p50 wait
//	pglock            1 g     4.4k–6.6k   70–100 µs        6.0k–6.2k               73–74 µs
//	pglock            8 g     1.6k–1.8k   0.29–0.33 ms     4.6k–5.1k               85–99 µs
//	pglock           64 g     1.0k–1.4k   3.4–8.1 ms       2.2k–2.5k               2.3–3.3 ms
//	redis Mutex       1 g     6.8k–7.1k   57–58 µs         7.2k–8.2k               42–56 µs
//	redis Mutex       8 g     6.5k–6.7k   63–78 µs         3.9k notified, 7.0k–7.3k polling
//	redis Mutex      64 g     3.4k–4.4k   1.2 ms           3.3k–3.4k notified, 3.7k–3.9k polling
//
// pglock makes 2 statements per uncontended acquisition (acquire and
// release), about 2.4–2.9 at 8 goroutines and 5–7 at 64. With the local
// turns (measured later the same day, go test -bench BenchmarkLock
// -benchtime 1s, the machine shared with four test builds): 2.0 statements
// per acquisition at 1, 8 and 64 goroutines; 1.9k, 5.8k and 2.2k acq/s. Uncontended, an
// acquire is one round trip either way and costs about the same as
// Redis'. Contended, pglock was 1.4–4× slower than the polling Mutex in
// these runs: every failed try still locks the row for its ON CONFLICT
// check, and every acquire and release writes a new row version, under the
// row lock the next acquirer needs. With fsync on, each acquire and
// release is also a commit flush (≈ 0.3 ms each on this box), so a sale
// under pglock pays three commits instead of one.
package pglock

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/internal/lock/turn"
)

// DB is what the lock needs of Postgres; *pgxpool.Pool and *pgx.Conn have it.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Options configures a Locker. The zero value works.
type Options struct {
	// TTL is the lease time, counted by Postgres from the acquiring
	// statement; default 30s. Nothing renews it.
	TTL time.Duration
	// Wait bounds how long Lock waits for a held lock, on top of ctx; default 10s.
	Wait time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential wait between
	// tries; defaults 1ms and 32ms.
	MinBackoff, MaxBackoff time.Duration
	// Observer receives events for metrics; nil means none.
	Observer Observer
}

// Observer receives lock events, e.g. to export metrics. Implementations must
// be safe for concurrent use and must not block. (Its methods are a subset
// of package redislock's Observer, so one value can serve both.)
type Observer interface {
	// Acquired reports one Lock or TryLock call: nil on success, else the
	// error returned; how long it waited; the statements it ran.
	Acquired(key string, err error, wait time.Duration, roundTrips int)
	// Lost reports a lease lost while held (its deadline passed).
	Lost(key string, reason error)
	// Released reports a release and how long the lock was held.
	Released(key string, held time.Duration, err error)
}

// Errors returned by this package, wrapped in *Error; match them with
// errors.Is. They mean what package redislock's errors of the same
// names mean.
var (
	// ErrNotAcquired: the lock is held by someone else (TryLock).
	ErrNotAcquired = errors.New("lock held by someone else")
	// ErrTimeout: Lock gave up waiting; it also wraps ctx.Err() or
	// context.DeadlineExceeded for the Wait budget.
	ErrTimeout = errors.New("timed out waiting for lock")
	// ErrLost: the lease is presumed lost; it comes with ErrExpired.
	ErrLost = errors.New("lock lost")
	// ErrExpired: the lease's local deadline passed.
	ErrExpired = errors.New("lease expired")
	// ErrNotHeld: a release of a lock this lease no longer holds (taken
	// over after it expired, or already released).
	ErrNotHeld = errors.New("lock not held by this owner")
	// ErrReleaseUnknown: the release's outcome is unknown (connection
	// lost); the lease ends at its expiry at the latest.
	ErrReleaseUnknown = errors.New("lock release outcome unknown")
	// ErrReleased: the cause of a lease context cancelled by Release.
	ErrReleased = errors.New("lock released")
)

// Error carries the operation and lock name that an error is about.
type Error struct {
	Op  string // "lock", "trylock", "release"
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("pglock: %s %s: %v", e.Op, e.Key, e.Err) }

// Unwrap lets errors.Is see the sentinel (and ctx.Err() for timeouts).
func (e *Error) Unwrap() error { return e.Err }

// Locker takes and releases locks in the locks table. Create one per
// process and share it; it is safe for concurrent use.
type Locker struct {
	db   DB
	opts Options

	// turns queues the Lock callers of one name in this process: only the
	// one whose turn it is polls Postgres.
	turns turn.Turns
}

// New returns a Locker over db; see Options for the defaults.
func New(db DB, opts Options) *Locker {
	if opts.TTL <= 0 {
		opts.TTL = 30 * time.Second
	}
	opts.TTL = max(opts.TTL, time.Millisecond)
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 32 * time.Millisecond
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	return &Locker{db: db, opts: opts}
}

// acquireSQL inserts the lock's row or takes it over when it is free or
// expired, in one statement; no row comes back when someone else holds it.
// The time is Postgres' own, read once (clock_timestamp(), not the
// transaction's start). If the statement then waits for a competing
// acquire's row lock, the time is from before the wait: the expiry check
// and the new expiry are then a little early, which errs towards the
// current holder.
const acquireSQL = `
INSERT INTO locks AS l (name, token, fence, expires_at, acquired_at)
SELECT $1, $2, 1, t + $3::bigint * interval '1 microsecond', t FROM (SELECT clock_timestamp() AS t) AS now
ON CONFLICT (name) DO UPDATE
SET token = excluded.token, fence = l.fence + 1, expires_at = excluded.expires_at, acquired_at = excluded.acquired_at
WHERE l.token IS NULL OR l.expires_at <= excluded.acquired_at
RETURNING fence`

// releaseSQL frees the lock only if this lease still holds it; the row and
// its fence stay.
const releaseSQL = `UPDATE locks SET token = NULL WHERE name = $1 AND token = $2`

// Lock acquires name, polling with jittered exponential backoff while it is
// held, for at most Options.Wait and never past ctx. Giving up returns
// *Error wrapping ErrTimeout and ctx.Err() (context.DeadlineExceeded for
// the Wait budget); a database failure returns *Error wrapping it.
func (l *Locker) Lock(ctx context.Context, name string) (*Lease, error) {
	return l.acquire(ctx, name, "lock", true)
}

// TryLock makes one attempt: *Error wrapping ErrNotAcquired if name is held.
func (l *Locker) TryLock(ctx context.Context, name string) (*Lease, error) {
	return l.acquire(ctx, name, "trylock", false)
}

func (l *Locker) acquire(ctx context.Context, name, op string, wait bool) (*Lease, error) {
	start := time.Now()
	tries := 0
	lease, err := l.attempt(ctx, name, op, wait, &tries)
	if l.opts.Observer != nil {
		l.opts.Observer.Acquired(name, err, time.Since(start), tries)
	}
	return lease, err
}

func (l *Locker) attempt(ctx context.Context, name, op string, wait bool, tries *int) (*Lease, error) {
	wctx := ctx
	if wait {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, l.opts.Wait)
		defer cancel()
	}
	done := func() {}
	if wait {
		var err error
		if done, err = l.turns.Wait(wctx, name); err != nil {
			return nil, timeoutError(op, name, wctx)
		}
	}
	lease, err := l.poll(ctx, wctx, name, op, wait, tries, done)
	if err != nil {
		done()
	}
	return lease, err
}

// poll tries to acquire name until it is granted, wctx ends or (!wait) once.
// done ends the caller's turn; the lease calls it when it ends.
func (l *Locker) poll(ctx, wctx context.Context, name, op string, wait bool, tries *int, done func()) (*Lease, error) {
	token := crand.Text()
	ceil := l.opts.MinBackoff
	for {
		if wctx.Err() != nil {
			return nil, timeoutError(op, name, wctx)
		}
		sent := time.Now()
		*tries++
		var fence int64
		err := l.db.QueryRow(wctx, acquireSQL, name, token, l.opts.TTL.Microseconds()).Scan(&fence)
		switch {
		case err == nil:
			return l.grant(ctx, name, token, fence, sent, done), nil
		case !errors.Is(err, pgx.ErrNoRows):
			// The statement may have committed before it was cancelled or
			// its connection broke: free the row if it carries our token.
			l.cleanup(ctx, name, token)
			*tries++
			if wctx.Err() != nil {
				return nil, timeoutError(op, name, wctx)
			}
			return nil, &Error{Op: op, Key: name, Err: err}
		case !wait:
			return nil, &Error{Op: op, Key: name, Err: ErrNotAcquired}
		}
		// Full jitter above the floor, so waiters spread out and none spins.
		d := l.opts.MinBackoff + rand.N(ceil-l.opts.MinBackoff+1)
		ceil = min(2*ceil, l.opts.MaxBackoff)
		if dl, ok := wctx.Deadline(); ok && time.Until(dl) < d {
			// One last try just before the budget ends rather than none.
			d = max(time.Until(dl)-time.Millisecond, 0)
		}
		t := time.NewTimer(d)
		select {
		case <-wctx.Done():
			t.Stop()
			return nil, timeoutError(op, name, wctx)
		case <-t.C:
		}
	}
}

// cleanupTimeout bounds the best-effort release after an acquire whose
// outcome is unknown.
const cleanupTimeout = 2 * time.Second

func (l *Locker) cleanup(ctx context.Context, name, token string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = l.db.Exec(cctx, releaseSQL, name, token)
}

// timeoutError reports giving up: ErrTimeout wrapping ctx's error.
func timeoutError(op, name string, ctx context.Context) error {
	return &Error{Op: op, Key: name, Err: fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())}
}

// driftFactor and driftFloor shorten the local deadline below the TTL, for
// clock-rate differences between this process and Postgres.
const (
	driftFactor = 100 // TTL/100
	driftFloor  = 2 * time.Millisecond
)

// grant builds the lease for an acquisition whose statement was sent at
// sent, and arms the timer that declares it lost at its local deadline.
// endTurn ends the caller's turn for name (see turn.Turns); the lease calls
// it once, when it ends.
func (l *Locker) grant(parent context.Context, name, token string, fence int64, sent time.Time, endTurn func()) *Lease {
	ttl := l.opts.TTL
	d := max(ttl-ttl/driftFactor-driftFloor, ttl/2)
	ctx, cancel := context.WithCancelCause(parent)
	lease := &Lease{l: l, name: name, token: token, fence: fence, start: time.Now(),
		deadline: sent.Add(d), ctx: ctx, cancel: cancel, endTurn: endTurn}
	lease.timer = time.AfterFunc(time.Until(lease.deadline), lease.expire)
	return lease
}

// Lease is one successful Lock or TryLock: the proof of holding a lock for
// as long as its Context is not cancelled.
type Lease struct {
	l        *Locker
	name     string
	token    string
	fence    int64
	start    time.Time
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer

	mu       sync.Mutex
	lost     error
	released atomic.Bool
	// endTurn lets the next local Lock caller of the name contend (a
	// no-op for TryLock); it runs at Release or at the deadline, and only
	// its first call counts.
	endTurn func()
}

// Key is the lock's name.
func (l *Lease) Key() string { return l.name }

// Fence is the fencing token of this acquisition: larger than every earlier
// acquisition's of the same name, whether they were released or taken over.
func (l *Lease) Fence() int64 { return l.fence }

// Deadline is when the lease ends on this process' clock: the acquisition
// time plus TTL, less a small allowance for clock drift.
func (l *Lease) Deadline() time.Time { return l.deadline }

// Context is derived from the ctx given to Lock and is cancelled when the
// lease expires (cause *Error wrapping ErrLost and ErrExpired) and on
// Release (cause wrapping ErrReleased). Run the protected work under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Err is nil while the lease holds, else why not: the loss (wrapping
// ErrLost) or ErrReleased.
func (l *Lease) Err() error {
	if l.released.Load() {
		return &Error{Op: "release", Key: l.name, Err: ErrReleased}
	}
	return l.loss()
}

// loss is the lease's loss, or nil; a deadline the timer has not reported
// yet counts.
func (l *Lease) loss() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil && !time.Now().Before(l.deadline) {
		l.lost = &Error{Op: "lock", Key: l.name, Err: fmt.Errorf("%w: %w", ErrLost, ErrExpired)}
	}
	return l.lost
}

// expire runs at the deadline: the lease is lost unless released first.
func (l *Lease) expire() {
	if l.released.Load() {
		return
	}
	cause := l.loss()
	if l.l.opts.Observer != nil {
		l.l.opts.Observer.Lost(l.name, cause)
	}
	l.cancel(cause)
	l.endTurn() // the row is free to take over now: let a local waiter try
}

// Release gives the lease up. nil: released. ErrLost: the lease had expired
// before (the work done under it may not have been exclusive); the row is
// still freed if nobody took it over. ErrNotHeld: the row no longer carries
// this lease's token, or the lease was already released.
// ErrReleaseUnknown: the outcome is unknown; the lease's expiry frees the
// lock at the latest. The lease's context is cancelled in every case.
func (l *Lease) Release(ctx context.Context) error {
	if l.released.Swap(true) {
		return &Error{Op: "release", Key: l.name, Err: fmt.Errorf("%w: lease already released", ErrNotHeld)}
	}
	l.timer.Stop()
	lost := l.loss()
	l.cancel(&Error{Op: "release", Key: l.name, Err: ErrReleased})
	tag, err := l.l.db.Exec(ctx, releaseSQL, l.name, l.token)
	var rerr error
	switch {
	case lost != nil:
		rerr = &Error{Op: "release", Key: l.name, Err: fmt.Errorf("lease was lost before release: %w", lost)}
	case err != nil:
		rerr = &Error{Op: "release", Key: l.name, Err: fmt.Errorf("%w: %w", ErrReleaseUnknown, err)}
	case tag.RowsAffected() != 1:
		rerr = &Error{Op: "release", Key: l.name, Err: ErrNotHeld}
	}
	l.endTurn()
	if l.l.opts.Observer != nil {
		l.l.opts.Observer.Released(l.name, time.Since(l.start), rerr)
	}
	return rerr
}
