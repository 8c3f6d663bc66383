package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/lock"
)

// Lease is one successful Lock or TryLock: the proof of holding a lock on a
// majority of the servers for as long as its Context is not cancelled. Its
// Fence is larger than every earlier holder's of the same key as long as no
// server of a granting majority lost its data meanwhile (see the package
// doc). Its Deadline is when its validity ends on this process's clock:
// the round's start plus TTL, less the drift allowance; its Context is
// cancelled then (cause wrapping lock.ErrLost and lock.ErrExpired).
type Lease struct {
	lock.State
	l     *Locker
	keys  []string
	token string

	// The winning round's per-server goroutines: Release tells them to
	// delete, each after its own set has returned.
	parts *parts

	// leaveQueue lets the next Lock caller of the key in this process
	// contend (a no-op for TryLock); it runs at Release or at the end of
	// the validity, and only its first call counts.
	leaveQueue func()
}

var (
	_ lock.Locker = (*Locker)(nil)
	_ lock.Lease  = (*Lease)(nil)
)

// grant builds the lease for a round sent at sent and valid until
// deadline, and arms the timer that declares it lost then.
func (l *Locker) grant(parent context.Context, key string, keys []string, token string, fence int64,
	sent, deadline time.Time, p *parts, leaveQueue func()) *Lease {
	lease := &Lease{l: l, keys: keys, token: token, parts: p, leaveQueue: leaveQueue}
	lease.Init(parent, lock.Grant{Backend: Backend, Key: key, Fence: lock.Fence{Backend: Backend, Token: fence},
		Start: sent, Observer: l.opts.Observer})
	lease.ExpireAt(deadline, leaveQueue) // the keys expire now: let a local waiter try
	return lease
}

// Release gives the lease up: compare-and-delete on every server at once,
// each after that server's set has returned and bounded by ServerTimeout.
// It returns as soon as a majority confirmed; the rest finish in the
// background. nil: released on a majority.
// lock.ErrLost: the validity had ended before (the work done under it may
// not have been exclusive); the keys are still deleted where they are ours.
// lock.ErrNotHeld: fewer than a majority still had our key (or the lease
// was already released). lock.ErrReleaseUnknown: too few confirmed and
// some did not answer; the keys expire by their TTL at the latest. The
// lease's context is cancelled in every case.
func (l *Lease) Release(ctx context.Context) error {
	lost, err := l.BeginRelease()
	if err != nil {
		return err
	}
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
		rerr = l.ReleaseError(lost, nil, false)
	case done >= lk.quorum:
	case len(errs) > 0:
		rerr = &lock.Error{Backend: Backend, Op: "release", Key: l.Key(), Err: fmt.Errorf("%w: released on %d of %d servers: %w",
			lock.ErrReleaseUnknown, done, len(lk.servers), errors.Join(errs...))}
	default:
		rerr = &lock.Error{Backend: Backend, Op: "release", Key: l.Key(), Err: fmt.Errorf("%w: ours on %d of %d servers", lock.ErrNotHeld, done, len(lk.servers))}
	}
	l.leaveQueue()
	return l.EndRelease(rerr)
}
