package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Lease is one successful Lock or TryLock: the proof of holding a lock on a
// majority of the servers for as long as its Context is not cancelled.
type Lease struct {
	l        *Locker
	key      string
	keys     []string
	token    string
	fence    int64
	start    time.Time
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer

	// The winning round's per-server goroutines: Release tells them to
	// delete, each after its own set has returned.
	parts *parts

	mu       sync.Mutex
	lost     error
	released atomic.Bool
	// endTurn lets the next Lock caller of the key in this process
	// contend (a no-op for TryLock); it runs at Release or at the end of
	// the validity, and only its first call counts.
	endTurn func()
}

// grant builds the lease for a round sent at sent and valid until
// deadline, and arms the timer that declares it lost then.
func (l *Locker) grant(parent context.Context, key string, keys []string, token string, fence int64,
	sent, deadline time.Time, p *parts, endTurn func()) *Lease {
	ctx, cancel := context.WithCancelCause(parent)
	lease := &Lease{l: l, key: key, keys: keys, token: token, fence: fence, start: sent, deadline: deadline,
		ctx: ctx, cancel: cancel, parts: p, endTurn: endTurn}
	lease.timer = time.AfterFunc(time.Until(deadline), lease.expire)
	return lease
}

// Key is the lock's name.
func (l *Lease) Key() string { return l.key }

// Fence is the fencing token of this acquisition: larger than every earlier
// holder's of the same key as long as no server of a granting majority lost
// its data meanwhile (see the package doc).
func (l *Lease) Fence() int64 { return l.fence }

// Deadline is when the lease's validity ends on this process's clock: the
// round's start plus TTL, less the drift allowance.
func (l *Lease) Deadline() time.Time { return l.deadline }

// Context is derived from the ctx given to Lock and is cancelled when the
// validity ends (cause *Error wrapping ErrLost and ErrExpired) and on
// Release (cause wrapping ErrReleased). Run the protected work under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Err is nil while the lease holds, else why not: the loss (wrapping
// ErrLost) or ErrReleased.
func (l *Lease) Err() error {
	if l.released.Load() {
		return &Error{Op: "release", Key: l.key, Err: ErrReleased}
	}
	return l.loss()
}

// loss is the lease's loss, or nil; a deadline the timer has not reported
// yet counts.
func (l *Lease) loss() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil && !time.Now().Before(l.deadline) {
		l.lost = &Error{Op: "lock", Key: l.key, Err: fmt.Errorf("%w: %w", ErrLost, ErrExpired)}
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
		l.l.opts.Observer.Lost(l.key, cause)
	}
	l.cancel(cause)
	l.endTurn() // the keys expire now: let a local waiter try
}

// Release gives the lease up: compare-and-delete on every server at once,
// each after that server's set has returned and bounded by ServerTimeout.
// It returns as soon as a majority confirmed; the rest finish in the
// background. nil: released on a majority.
// ErrLost: the validity had ended before (the work done under it may not
// have been exclusive); the keys are still deleted where they are ours.
// ErrNotHeld: fewer than a majority still had our key (or the lease was
// already released). ErrReleaseUnknown: too few confirmed and some did not
// answer; the keys expire by their TTL at the latest. The lease's context
// is cancelled in every case.
func (l *Lease) Release(ctx context.Context) error {
	if l.released.Swap(true) {
		return &Error{Op: "release", Key: l.key, Err: fmt.Errorf("%w: lease already released", ErrNotHeld)}
	}
	l.timer.Stop()
	lost := l.loss()
	l.cancel(&Error{Op: "release", Key: l.key, Err: ErrReleased})
	lk := l.l
	l.parts.dropAll()
	// A server's release may wait for its set, then run: two timeouts.
	wait := time.NewTimer(2 * lk.opts.ServerTimeout)
	defer wait.Stop()
	var done, answered int
	var errs []error
	for done < lk.quorum && answered < len(lk.servers) {
		var rp reply
		select {
		case rp = <-l.parts.released:
		case <-wait.C:
		case <-ctx.Done():
		}
		if rp.state == 0 {
			errs = append(errs, fmt.Errorf("%d servers: no answer within %v", len(lk.servers)-answered, 2*lk.opts.ServerTimeout))
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
			}
			break
		}
		answered++
		switch rp.state {
		case granted:
			done++
		case failed:
			errs = append(errs, fmt.Errorf("server %d: %w", rp.server, rp.err))
		}
	}
	var rerr error
	switch {
	case lost != nil:
		rerr = &Error{Op: "release", Key: l.key, Err: fmt.Errorf("lease was lost before release: %w", lost)}
	case done >= lk.quorum:
	case len(errs) > 0:
		rerr = &Error{Op: "release", Key: l.key, Err: fmt.Errorf("%w: released on %d of %d servers: %w",
			ErrReleaseUnknown, done, len(lk.servers), errors.Join(errs...))}
	default:
		rerr = &Error{Op: "release", Key: l.key, Err: fmt.Errorf("%w: ours on %d of %d servers", ErrNotHeld, done, len(lk.servers))}
	}
	l.endTurn()
	if lk.opts.Observer != nil {
		lk.opts.Observer.Released(l.key, time.Since(l.start), rerr)
	}
	return rerr
}
