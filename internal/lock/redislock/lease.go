package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"inventory/internal/lock"
)

// LostReason names why err says a lease was lost, for metric labels:
// "max_hold", "not_owner" (the key was gone or carried another token at
// renewal or re-entry), "expired" (validity deadline passed), or "" when err
// is not a loss.
func LostReason(err error) string {
	switch {
	case errors.Is(err, lock.ErrMaxHold):
		return "max_hold"
	case !errors.Is(err, lock.ErrLost):
		return ""
	case errors.Is(err, lock.ErrNotHeld):
		return "not_owner"
	case errors.Is(err, lock.ErrExpired):
		return "expired"
	}
	return "lost"
}

// validUntil is the local validity deadline of a key whose TTL was set by a
// command sent at sent: measured on the monotonic clock from before the
// send, so a slow reply only makes it earlier than Redis', never later,
// and less the drift allowance of lock.ValidUntil.
func validUntil(sent time.Time, ttl time.Duration) time.Time { return lock.ValidUntil(sent, ttl) }

// hold is one acquisition in Redis: its token, fence, local validity
// deadline and, when it has one, the watchdog goroutine that renews it. A
// Mutex hold has one Lease; a Reentrant hold one per nested Lock.
type hold struct {
	key     string
	token   string
	ttl     time.Duration
	maxHold time.Duration
	obs     lock.Observer
	backend string // the fencing counter's: Backend or FairBackend
	// renew extends the key's TTL if it still carries token; false means
	// "not ours", which is terminal. nil: no watchdog.
	renew func(ctx context.Context) (bool, error)
	// leave gives this process's turn at the key to its next Lock call
	// (base.turn); nil without a turn. Called once the hold is over:
	// released, or lost (the next one may then take the key in Redis
	// while the lost holder's work is being cancelled, as another
	// process's would).
	leave func()

	// Set by arm, before the hold is shared.
	fence     int64
	maxHoldAt time.Time // zero without MaxHold
	ctx       context.Context
	cancel    context.CancelFunc // ends renewals in flight and the watchdog
	done      chan struct{}      // closed when the watchdog has exited; nil without one

	mu       sync.Mutex
	deadline time.Time
	lost     error // why the hold was lost; nil while held
	ended    bool  // Release has begun: no loss is reported after it
	leases   map[*Lease]struct{}
	timer    *time.Timer // fires at the deadline (or MaxHold) to declare the hold lost
}

// newHold registers a hold before its acquiring command is sent; nothing
// runs until arm.
func newHold(backend, key, token string, o *Options, renew func(context.Context) (bool, error)) *hold {
	h := &hold{key: key, token: token, ttl: o.TTL, obs: o.Observer, backend: backend, renew: renew, leases: map[*Lease]struct{}{}}
	if renew != nil {
		h.maxHold = o.MaxHold
	}
	return h
}

// arm starts the hold once Redis granted it: the deadline timer and, with
// renewals, the watchdog. sent is when the granting command was sent.
func (h *hold) arm(sent time.Time, fence int64) {
	h.fence = fence
	h.deadline = validUntil(sent, h.ttl)
	if h.maxHold > 0 {
		h.maxHoldAt = sent.Add(h.maxHold)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.mu.Lock()
	h.timer = time.AfterFunc(time.Until(h.limitLocked()), h.onTimer)
	h.mu.Unlock()
	if h.renew != nil {
		h.done = make(chan struct{})
		go h.watch()
	}
}

// limitLocked is the moment the hold ends unless renewed: the validity
// deadline, or MaxHold if sooner.
func (h *hold) limitLocked() time.Time {
	if !h.maxHoldAt.IsZero() && h.maxHoldAt.Before(h.deadline) {
		return h.maxHoldAt
	}
	return h.deadline
}

// overdueLocked is the loss the clock alone proves, or nil.
func (h *hold) overdueLocked(now time.Time) error {
	if !h.maxHoldAt.IsZero() && !now.Before(h.maxHoldAt) {
		return &lock.Error{Backend: Backend, Op: "renew", Key: h.key, Err: fmt.Errorf("%w: %w (%v)", lock.ErrLost, lock.ErrMaxHold, h.maxHold)}
	}
	if !now.Before(h.deadline) {
		op := "renew"
		if h.renew == nil {
			op = "lock"
		}
		return &lock.Error{Backend: Backend, Op: op, Key: h.key, Err: fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrExpired)}
	}
	return nil
}

func (h *hold) onTimer() {
	h.mu.Lock()
	if h.lost != nil || h.ended {
		h.mu.Unlock()
		return
	}
	now := time.Now()
	cause := h.overdueLocked(now)
	if cause == nil { // renewed since the timer was set
		h.timer.Reset(h.limitLocked().Sub(now))
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.lose(cause)
}

// lose marks the hold lost with cause, once, unless Release has begun; it
// stops the watchdog and cancels every lease's context with cause.
func (h *hold) lose(cause error) {
	h.mu.Lock()
	if h.lost != nil || h.ended {
		h.mu.Unlock()
		return
	}
	h.lost = cause
	leases := make([]*Lease, 0, len(h.leases))
	for l := range h.leases {
		leases = append(leases, l)
	}
	h.mu.Unlock()
	h.cancel()
	h.obs.Lost(h.key, cause) // before the holder is woken, so metrics never lag behind it
	for _, l := range leases {
		l.Lose(cause)
	}
	h.leaveTurn()
}

// leaveTurn gives the process's turn at the key to its next Lock call, if
// the hold has one; a second call does nothing (localqueue's leave runs once).
func (h *hold) leaveTurn() {
	if h.leave != nil {
		h.leave()
	}
}

// err is why the hold is no longer valid, or nil.
func (h *hold) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost != nil {
		return h.lost
	}
	if !h.ended {
		return h.overdueLocked(time.Now())
	}
	return nil
}

// end stops the hold at the start of its last release: from here no loss is
// reported, the watchdog has exited when end returns, and the timer is
// stopped. It returns the loss that happened before, if any (including one
// the clock proves but the timer has not yet reported).
func (h *hold) end() error {
	h.mu.Lock()
	if h.ended {
		lost := h.lost
		h.mu.Unlock()
		return lost
	}
	cause := h.lost
	if cause == nil {
		cause = h.overdueLocked(time.Now())
	}
	if cause != nil && h.lost == nil {
		h.mu.Unlock()
		h.lose(cause)
		h.mu.Lock()
	}
	h.ended = true
	cause = h.lost
	h.mu.Unlock()
	h.cancel()
	h.timer.Stop()
	if h.done != nil {
		<-h.done
	}
	return cause
}

// extend moves the deadline after a renewal that was sent at sent.
func (h *hold) extend(sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost != nil || h.ended || !sent.Before(h.deadline) {
		return
	}
	if d := validUntil(sent, h.ttl); d.After(h.deadline) {
		h.deadline = d
	}
}

// limit is the current local validity deadline, capped by MaxHold.
func (h *hold) limit() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limitLocked()
}

// watch renews the key every TTL/3 while the hold lasts. A "not ours" reply
// ends the hold at once; errors are retried with backoff until the deadline
// timer declares the hold lost. It never re-acquires.
func (h *hold) watch() {
	defer close(h.done)
	every := h.ttl / 3
	retry := newBackoff(max(every/10, time.Millisecond), max(every/3, time.Millisecond))
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(h.ctx, h.limit())
		ok, err := h.renew(ctx)
		cancel()
		if h.ctx.Err() != nil { // released or lost while the renewal was in flight
			return
		}
		switch {
		case err == nil && ok:
			h.obs.Renewed(h.key, nil)
			h.extend(sent)
			retry = newBackoff(retry.min, retry.max)
			t.Reset(every)
		case err == nil:
			cause := &lock.Error{Backend: Backend, Op: "renew", Key: h.key, Err: fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrNotHeld)}
			h.obs.Renewed(h.key, cause)
			h.lose(cause)
			return
		default:
			h.obs.Renewed(h.key, &lock.Error{Backend: Backend, Op: "renew", Key: h.key, Err: err})
			t.Reset(retry.next())
		}
	}
}

// addLease hands out a lease on the hold, whose context derives from parent.
func (h *hold) addLease(parent context.Context, release func(context.Context, *Lease) error) *Lease {
	l := &Lease{h: h, release: release}
	l.Init(parent, lock.Grant{Backend: Backend, Key: h.key, Fence: lock.Fence{Backend: h.backend, Token: h.fence},
		Observer: leaseObserver{h.obs}})
	h.mu.Lock()
	lost := h.lost
	if lost == nil {
		h.leases[l] = struct{}{}
	}
	h.mu.Unlock()
	if lost != nil {
		l.Lose(lost)
	}
	return l
}

func (h *hold) dropLease(l *Lease) {
	h.mu.Lock()
	delete(h.leases, l)
	h.mu.Unlock()
}

// leaseObserver is a lease's Observer: it passes Released on; the hold
// reports a loss itself, once for all the nested leases it has.
type leaseObserver struct{ lock.Observer }

func (leaseObserver) Lost(string, error) {}

// Lease is one successful Lock or TryLock: the proof of holding a lock, for
// as long as its Context is not cancelled. Its Fence is larger than every
// earlier acquisition's of the key, and the same for nested re-entries of
// one Reentrant hold. Its Context is cancelled the moment the lock is known
// or presumed lost (cause wrapping lock.ErrLost, and lock.ErrMaxHold,
// lock.ErrNotHeld or lock.ErrExpired for the reason) and on Release.
type Lease struct {
	lock.State
	h       *hold
	owner   string // Reentrant leases only
	release func(context.Context, *Lease) error
}

var _ lock.Lease = (*Lease)(nil)

// Deadline is the current local validity deadline: renewals advance it;
// MaxHold caps it. Without a watchdog it is the acquisition time plus TTL,
// less a small allowance for clock drift.
func (l *Lease) Deadline() time.Time { return l.h.limit() }

// Err is nil while the lease holds, else why not: the loss (wrapping
// lock.ErrLost) or lock.ErrReleased.
func (l *Lease) Err() error {
	if err := l.State.Err(); err != nil {
		return err
	}
	return l.h.err()
}

// Release gives the lease up. nil: released. lock.ErrNotHeld: Redis had no
// such hold (or the lease was already released, or ctx carries a different
// Reentrant owner). lock.ErrLost: the lease had been lost before (the work
// done under it may not have been exclusive). lock.ErrReleaseUnknown: the
// outcome is unknown (network); the key expires by its TTL at the latest,
// as no watchdog renews it any more. The lease's context is cancelled in
// every case.
func (l *Lease) Release(ctx context.Context) error { return l.release(ctx, l) }
