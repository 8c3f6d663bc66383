package lock

import (
	"errors"
	"fmt"
)

// Errors every backend returns, wrapped in *Error; match them with
// errors.Is. A backend's own causes of a loss (a ZooKeeper session
// expired, an etcd key deleted) wrap ErrLost.
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
)

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
