package lock

import (
	"errors"
	"fmt"
)

// Errors every backend returns, wrapped in *Error; match them with
// errors.Is. A backend's own causes of a loss (a ZooKeeper session
// expired, an etcd key deleted) wrap ErrLost. These are the kinds a user
// of any backend tells apart without asking which backend it has: an
// error of Lock or TryLock wraps ErrNotAcquired, ErrTimeout, ErrLost,
// ErrInvalidKey, ErrClosed or, for every other failure, ErrUnavailable
// (see Acquire).
var (
	// ErrNotAcquired: the lock is held by someone else (TryLock).
	ErrNotAcquired = errors.New("lock held by someone else")
	// ErrTimeout: Lock gave up waiting; the error also wraps ctx.Err() (or
	// context.DeadlineExceeded for the Wait budget).
	ErrTimeout = errors.New("timed out waiting for lock")
	// ErrLost: the lease is known or presumed lost; the error also wraps
	// the reason (ErrExpired, ErrNotHeld, ErrMaxHold, ErrClosed or a
	// backend's own).
	ErrLost = errors.New("lock lost")
	// ErrExpired: the lease's local validity deadline passed without a
	// renewal; it comes wrapped with ErrLost.
	ErrExpired = errors.New("lease expired")
	// ErrMaxHold: a watchdog stopped renewing after the longest hold it
	// was allowed; it comes wrapped with ErrLost.
	ErrMaxHold = errors.New("lock held longer than MaxHold")
	// ErrNotHeld: release (or re-entry) of a lock this owner does not hold
	// (any more), or of a lease already released.
	ErrNotHeld = errors.New("lock not held by this owner")
	// ErrReleaseUnknown: the release's outcome is unknown (network); the
	// backend frees the lock by its TTL at the latest.
	ErrReleaseUnknown = errors.New("lock release outcome unknown")
	// ErrReleased: the cause of a lease context cancelled by Release, and
	// what Lease.Err reports after it.
	ErrReleased = errors.New("lock released")
	// ErrInvalidKey: the backend cannot name a lock by this key.
	ErrInvalidKey = errors.New("invalid lock key")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("locker closed")
	// ErrUnavailable: the backend's servers did not answer, or answered
	// with a failure (a connection refused or cut, a server error): no
	// lock was taken, and trying again later may work.
	ErrUnavailable = errors.New("lock backend unavailable")
)

// kinds are the errors of Lock and TryLock a caller acts on; anything else
// an attempt fails with is the backend's servers failing (ErrUnavailable).
var kinds = []error{ErrNotAcquired, ErrTimeout, ErrLost, ErrInvalidKey, ErrClosed, ErrUnavailable}

// classify is err (of an attempt to take key) wrapping ErrUnavailable when
// it wraps none of the kinds, so that every backend's failures reach their
// callers as one kind, whatever the backend's servers are.
func classify(err error, op, key string) error {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return err
		}
	}
	var e *Error
	if errors.As(err, &e) {
		return &Error{Backend: e.Backend, Op: e.Op, Key: e.Key, Err: fmt.Errorf("%w: %w", ErrUnavailable, e.Err)}
	}
	return &Error{Op: op, Key: key, Err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
}

// Error carries the backend, operation and key that an error is about.
type Error struct {
	Backend string // e.g. "redislock", "etcdlock"
	Op      string // "lock", "trylock", "renew", "release", …
	Key     string
	Err     error
}

func (e *Error) Error() string {
	if e.Backend == "" {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %s %s: %v", e.Backend, e.Op, e.Key, e.Err)
}

// Unwrap lets errors.Is see the sentinel (and ctx.Err() for timeouts).
func (e *Error) Unwrap() error { return e.Err }
