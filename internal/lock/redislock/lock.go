package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Options configures a Mutex or a Reentrant lock. The zero value works.
type Options struct {
	// TTL is the lease time set on the Redis key; default 30s. Without a
	// watchdog the lock is gone TTL after it was acquired.
	TTL time.Duration
	// Wait bounds how long Lock waits for a held lock, on top of ctx; default 10s.
	Wait time.Duration
	// PollInterval is the longest a waiter waits for a release notice
	// before trying again anyway, in case one was lost (the subscription's
	// connection dropped, or a key expired or was deleted without a
	// release). Each wait is uniform in [PollInterval/2, PollInterval] and
	// not much longer than the holder's remaining TTL; default 1s. With
	// more than 10 waiters on a key in one process, each waits
	// proportionally longer, so that together they retry about 10 times per
	// PollInterval.
	PollInterval time.Duration
	// PollOnly makes waiters sleep-poll with backoff (MinBackoff,
	// MaxBackoff) instead of waiting for release notices: no pub/sub
	// subscription. For comparison; the default is notified waiting.
	PollOnly bool
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between tries of a PollOnly waiter; defaults 1ms and 32ms.
	MinBackoff, MaxBackoff time.Duration
	// Watchdog renews a Mutex's lease every TTL/3 while it is held. A
	// Reentrant lock always has one.
	Watchdog bool
	// MaxHold, when positive, is the longest a watchdog keeps a lock alive:
	// after it the lease is lost with ErrMaxHold.
	MaxHold time.Duration
	// FenceFloor, when set, is asked for the highest fencing token the
	// protected storage has seen, only when Redis has no fencing counter for
	// the key (first use, or after Redis lost its data), so tokens never go
	// backwards.
	FenceFloor func(ctx context.Context, key string) (int64, error)
	// Observer receives events for metrics; nil means none.
	Observer Observer
}

// Observer receives lock events, e.g. to export metrics. Implementations must
// be safe for concurrent use and must not block.
type Observer interface {
	// Acquired reports one Lock or TryLock call: its outcome (nil on success,
	// else the error returned), how long it waited, and the Redis round trips it made.
	Acquired(key string, err error, wait time.Duration, roundTrips int)
	// Renewed reports one watchdog renewal attempt: nil on success.
	Renewed(key string, err error)
	// Lost reports a lease lost while held, with the reason (ErrLost, ErrMaxHold, …).
	Lost(key string, reason error)
	// Released reports a release and how long the lock was held.
	Released(key string, held time.Duration, err error)
}

// Errors returned by this package, wrapped in *Error; match them with errors.Is.
var (
	// ErrNotAcquired: the lock is held by someone else (TryLock).
	ErrNotAcquired = errors.New("lock held by someone else")
	// ErrTimeout: Lock gave up waiting; the error also wraps ctx.Err() or
	// context.DeadlineExceeded for the Wait budget.
	ErrTimeout = errors.New("timed out waiting for lock")
	// ErrLost: the lease is known or presumed lost (another owner holds the key,
	// the key is gone, or renewals failed past the validity deadline).
	ErrLost = errors.New("lock lost")
	// ErrMaxHold: the watchdog stopped renewing after Options.MaxHold.
	ErrMaxHold = errors.New("lock held longer than MaxHold")
	// ErrNotHeld: release or re-entry of a lock this owner does not hold.
	ErrNotHeld = errors.New("lock not held by this owner")
	// ErrReleaseUnknown: the release command's outcome is unknown (network
	// error); the key expires by its TTL at the latest.
	ErrReleaseUnknown = errors.New("lock release outcome unknown")
	// ErrNoOwner: a Reentrant lock was asked for without WithOwner in the context.
	ErrNoOwner = errors.New("no lock owner in context")
	// ErrExpired: the lease's validity deadline passed without a successful
	// renewal (no watchdog, or Redis unreachable); it comes wrapped with
	// ErrLost, as the lease is presumed lost.
	ErrExpired = errors.New("validity deadline passed")
	// ErrReleased: the cause of a lease context cancelled by Release, and
	// what Lease.Err reports after it.
	ErrReleased = errors.New("lock released")
	// ErrInvalidKey: the key cannot be given a companion fencing key in the
	// same Redis Cluster slot (it is empty, or has no hash tag and contains '}').
	ErrInvalidKey = errors.New("invalid lock key")
)

// Error carries the operation and key that an error is about.
type Error struct {
	Op  string // "lock", "trylock", "renew", "release"
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.Key, e.Err) }

// Unwrap lets errors.Is see the sentinel (and ctx.Err() for timeouts).
func (e *Error) Unwrap() error { return e.Err }
