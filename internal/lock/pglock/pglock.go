// Package pglock provides a lock table in Postgres whose leases end on
// Postgres' clock and carry fencing tokens that never go backwards.
//
// One row of the table locks (migrations/00003_locks.sql) per lock name
// holds the holder's token, its expiry on Postgres' clock and the fence
// (how many times the lock was granted). Acquiring is one statement that
// inserts the row or takes it over when it is free or expired, adding one
// to the fence; Release clears the token only if it is still ours. There
// is no watchdog: a lease's local deadline (TTL less a drift allowance,
// from before the acquiring statement) cancels its Context no later than
// the row expires while Postgres' clock runs at about this process's rate;
// a step of Postgres' clock can end the row's lease early, and then the
// fence, not the lease, refuses the stale holder. Lock callers of one name in one process queue in memory
// (package localqueue); across processes they poll with jittered backoff.
// docs/locks.md says how this differs from the seeds' database lock and
// what it does not cover.
package pglock

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/internal/lock"
	"inventory/internal/lock/localqueue"
)

// DB is what the lock needs of Postgres; *pgxpool.Pool and *pgx.Conn have it.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Backend names this package in errors and fences: a lease's
// Fence().Backend, and the Backend of every *lock.Error it returns.
const Backend = "pglock"

// Options configures a Locker. The zero value works; lock.Options has
// TTL (the lease time, counted by Postgres from the acquiring statement;
// nothing renews it), Wait and Observer, with their defaults.
type Options struct {
	lock.Options
	// MinBackoff and MaxBackoff bound the jittered exponential wait between
	// tries; defaults 1ms and 32ms.
	MinBackoff, MaxBackoff time.Duration
}

// Locker takes and releases locks in the locks table. Create one per
// process and share it; it is safe for concurrent use.
type Locker struct {
	db   DB
	opts Options

	// waiters queues the Lock callers of one name in this process: only
	// the first polls Postgres.
	waiters localqueue.Queues

	cleanups lock.Cleanups // releases still running after their Lock answered
}

// New returns a Locker over db; see Options for the defaults.
func New(db DB, opts Options) *Locker {
	opts.Options = opts.WithDefaults()
	opts.TTL = max(opts.TTL, time.Millisecond)
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
// *lock.Error wrapping lock.ErrTimeout and ctx.Err()
// (context.DeadlineExceeded for the Wait budget); a database failure
// returns *lock.Error wrapping it.
func (l *Locker) Lock(ctx context.Context, name string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, name, "lock", true, l.attempt)
}

// TryLock makes one attempt: *lock.Error wrapping lock.ErrNotAcquired if
// name is held.
func (l *Locker) TryLock(ctx context.Context, name string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, name, "trylock", false, l.attempt)
}

func (l *Locker) attempt(ctx context.Context, name, op string, wait bool, tries *int) (*Lease, error) {
	wctx, cancel := l.opts.WaitContext(ctx, wait)
	defer cancel()
	done := func() {}
	if wait {
		var err error
		if done, err = l.waiters.Wait(wctx, name); err != nil {
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
// done takes the caller out of the local queue; the lease calls it when it ends.
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
			l.cleanup(ctx, wctx, name, token)
			*tries++
			if wctx.Err() != nil {
				return nil, timeoutError(op, name, wctx)
			}
			return nil, &lock.Error{Backend: Backend, Op: op, Key: name, Err: classify(err)}
		case !wait:
			return nil, &lock.Error{Backend: Backend, Op: op, Key: name, Err: lock.ErrNotAcquired}
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
// outcome is unknown; the release goes on in the background (see
// lock.Cleanups), and Close waits for it.
const cleanupTimeout = 2 * time.Second

// cleanup frees name's row if it carries token, in the background; it
// waits for that until wctx ends and at most lock.CleanupWait.
func (l *Locker) cleanup(ctx, wctx context.Context, name, token string) {
	l.cleanups.Run(wctx, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, _ = l.db.Exec(cctx, releaseSQL, name, token)
	})
}

// Close waits for the releases still running in the background after
// acquires of unknown outcome (each at most 2s). The Locker stays usable.
func (l *Locker) Close() { l.cleanups.Wait() }

// classify is a failed acquire statement's error as the lock contract's
// kind: Postgres giving up on the locks row's row lock (lock_timeout, which
// the service sets on its pool) is a timeout like a wait that ran out;
// anything else is left to lock.Acquire, which makes it ErrUnavailable.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		return fmt.Errorf("%w: %w", lock.ErrTimeout, err)
	}
	return err
}

// timeoutError reports giving up: lock.ErrTimeout wrapping ctx's error.
func timeoutError(op, name string, ctx context.Context) error {
	return &lock.Error{Backend: Backend, Op: op, Key: name, Err: fmt.Errorf("%w: %w", lock.ErrTimeout, ctx.Err())}
}

// grant builds the lease for an acquisition whose statement was sent at
// sent, and arms the timer that declares it lost at its local deadline.
// leaveQueue takes the caller out of name's local queue (localqueue); the lease calls
// it once, when it ends.
func (l *Locker) grant(parent context.Context, name, token string, fence int64, sent time.Time, leaveQueue func()) *Lease {
	lease := &Lease{l: l, token: token, leaveQueue: leaveQueue}
	lease.Init(parent, lock.Grant{Backend: Backend, Key: name, Fence: lock.Fence{Backend: Backend, Token: fence},
		Observer: l.opts.Observer})
	// At the deadline the row is free to take over: let a local waiter try.
	lease.ExpireAt(lock.ValidUntil(sent, l.opts.TTL), leaveQueue)
	return lease
}

// Lease is one successful Lock or TryLock: the proof of holding a lock for
// as long as its Context is not cancelled. Its Fence is larger than every
// earlier acquisition's of the same name, whether they were released or
// taken over; its Deadline is when it ends on this process's clock: the
// acquisition time plus TTL, less a small allowance for clock drift.
type Lease struct {
	lock.State
	l     *Locker
	token string
	// leaveQueue lets the next local Lock caller of the name contend (a
	// no-op for TryLock); it runs at Release or at the deadline, and only
	// its first call counts.
	leaveQueue func()
}

var (
	_ lock.Locker = (*Locker)(nil)
	_ lock.Lease  = (*Lease)(nil)
)

// Release gives the lease up. nil: released. lock.ErrLost: the lease had
// expired before (the work done under it may not have been exclusive); the
// row is still freed if nobody took it over. lock.ErrNotHeld: the row no
// longer carries this lease's token, or the lease was already released.
// lock.ErrReleaseUnknown: the outcome is unknown; the lease's expiry frees
// the lock at the latest. The lease's context is cancelled in every case.
func (l *Lease) Release(ctx context.Context) error {
	lost, err := l.BeginRelease()
	if err != nil {
		return err
	}
	tag, err := l.l.db.Exec(ctx, releaseSQL, l.Key(), l.token)
	l.leaveQueue()
	return l.EndRelease(l.ReleaseError(lost, err, err == nil && tag.RowsAffected() == 1))
}
