package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// State is the part of a lease that every backend keeps the same way: its
// key and fence, its context and the cancellation of it with a cause, the
// loss (recorded and reported once, never after Release began), the
// released mark, an optional fixed validity deadline with the timer that
// declares the loss at it, and the Observer's Lost and Released events.
//
// A backend embeds a State in its Lease and calls Init before handing the
// lease out, Lose when it learns the lock is gone, and BeginRelease and
// EndRelease around its release command. The embedding Lease then has
// Key, Fence, Context, Done, Deadline and Err.
type State struct {
	backend string
	key     string
	fence   Fence
	obs     Observer
	start   time.Time
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // zero: none
	timer    *time.Timer
	lost     error
	released bool
}

// Grant describes a lease as its backend hands it out.
type Grant struct {
	Backend  string    // names the backend in errors (Error.Backend)
	Key      string    // the lock's name
	Fence    Fence     // the acquisition's fencing token
	Start    time.Time // when the hold began, for Observer.Released; zero: now
	Observer Observer  // gets Lost and Released; nil: none
}

// Init starts the lease: its context derives from parent. Call it once,
// before the lease is shared.
func (s *State) Init(parent context.Context, g Grant) {
	s.backend, s.key, s.fence, s.obs, s.start = g.Backend, g.Key, g.Fence, g.Observer, g.Start
	if s.start.IsZero() {
		s.start = time.Now()
	}
	s.ctx, s.cancel = context.WithCancelCause(parent)
}

// ExpireAt gives the lease a fixed validity deadline on this process's
// clock: at it the lease is lost (ErrLost, ErrExpired) unless released or
// lost before, and then expired runs (if not nil). Err and BeginRelease
// count a deadline that passed even before the timer has fired.
func (s *State) ExpireAt(deadline time.Time, expired func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline = deadline
	s.timer = time.AfterFunc(time.Until(deadline), func() {
		if s.Lose(s.LostError("lock", ErrExpired)) && expired != nil {
			expired()
		}
	})
}

// Key is the lock's name.
func (s *State) Key() string { return s.key }

// Fence is the acquisition's fencing token.
func (s *State) Fence() Fence { return s.fence }

// Context derives from the ctx the lease was acquired with and is
// cancelled when the lease is lost (cause wrapping ErrLost) and on Release
// (cause wrapping ErrReleased).
func (s *State) Context() context.Context { return s.ctx }

// Done is Context().Done().
func (s *State) Done() <-chan struct{} { return s.ctx.Done() }

// Deadline is the fixed validity deadline set by ExpireAt, or the zero
// time for a lease without one (its backend's server ends it).
func (s *State) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Err is nil while the lease holds, else why not: the loss (wrapping
// ErrLost) or ErrReleased.
func (s *State) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.released:
		return s.releasedError()
	case s.lost != nil:
		return s.lost
	}
	return s.overdueLocked(time.Now())
}

// LostError is the cause of a loss for reason: *Error wrapping ErrLost
// and reason (reason alone when it wraps ErrLost already).
func (s *State) LostError(op string, reason error) error {
	if !errors.Is(reason, ErrLost) {
		reason = fmt.Errorf("%w: %w", ErrLost, reason)
	}
	return &Error{Backend: s.backend, Op: op, Key: s.key, Err: reason}
}

// Lose records cause (which should wrap ErrLost) as the lease's loss,
// reports it to the Observer and then cancels the context with it. It does
// nothing, and reports false, once the lease was lost or its release began.
func (s *State) Lose(cause error) bool {
	s.mu.Lock()
	if s.released || s.lost != nil {
		s.mu.Unlock()
		return false
	}
	s.lost = cause
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	if s.obs != nil {
		s.obs.Lost(s.key, cause) // before the holder is woken, so metrics never lag behind it
	}
	s.cancel(cause)
	return true
}

// BeginRelease marks the lease released, stops its deadline timer and
// cancels its context with ErrReleased; from here no loss is reported. It
// returns the loss that came before, if any (a passed deadline included).
// A lease already released gets err, wrapping ErrNotHeld, instead.
func (s *State) BeginRelease() (lost, err error) {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return nil, &Error{Backend: s.backend, Op: "release", Key: s.key, Err: fmt.Errorf("%w: lease already released", ErrNotHeld)}
	}
	s.released = true
	lost = s.lost
	if lost == nil {
		lost = s.overdueLocked(time.Now())
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel(s.releasedError())
	return lost, nil
}

// EndRelease reports the release's outcome err, and how long the lock was
// held, to the Observer, and returns err.
func (s *State) EndRelease(err error) error {
	if s.obs != nil {
		s.obs.Released(s.key, time.Since(s.start), err)
	}
	return err
}

// ReleaseError is what Release returns once the backend's release command
// has run: lost is the loss BeginRelease returned, err the command's
// failure (the outcome unknown), held whether the backend still had the
// hold (and has now let it go). nil: released.
func (s *State) ReleaseError(lost, err error, held bool) error {
	switch {
	case lost != nil:
		return &Error{Backend: s.backend, Op: "release", Key: s.key, Err: fmt.Errorf("lease was lost before release: %w", lost)}
	case err != nil:
		return &Error{Backend: s.backend, Op: "release", Key: s.key, Err: fmt.Errorf("%w: %w", ErrReleaseUnknown, err)}
	case !held:
		return &Error{Backend: s.backend, Op: "release", Key: s.key, Err: ErrNotHeld}
	}
	return nil
}

func (s *State) releasedError() error {
	return &Error{Backend: s.backend, Op: "release", Key: s.key, Err: ErrReleased}
}

// overdueLocked is the loss the deadline alone proves, or nil.
func (s *State) overdueLocked(now time.Time) error {
	if s.deadline.IsZero() || now.Before(s.deadline) {
		return nil
	}
	return s.LostError("lock", ErrExpired)
}

// Drift allowance of ValidUntil: a lease is trusted for its TTL less
// TTL/driftFactor and driftFloor, as Redlock does, so that a server clock
// running up to 1% faster than this process's does not end it first.
const (
	driftFactor = 100
	driftFloor  = 2 * time.Millisecond
)

// ValidUntil is the local validity deadline of a lease of ttl that a
// server granted or renewed on a request sent at sent: sent plus ttl less
// the drift allowance (ttl/100 + 2ms), and never less than ttl/2. Read
// sent before the request goes out, on the monotonic clock (time.Now): a
// slow answer then only makes the deadline earlier than the server's,
// never later.
func ValidUntil(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(max(ttl-ttl/driftFactor-driftFloor, ttl/2))
}
