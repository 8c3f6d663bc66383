package redislock

import (
	"context"
	"errors"
	"time"

	"inventory/internal/lock"
)

// Backend names this package in errors, and the fencing counter that a
// Mutex and a Reentrant lock share in a lease's Fence().Backend; a Fair
// lock's tokens come from a counter of its own, FairBackend.
const (
	Backend     = "redislock"
	FairBackend = "redislock/fair"
)

// Options configures a Mutex, Reentrant or Fair lock. The zero value works;
// lock.Options has TTL (the lease time set on the Redis key: without a
// watchdog the lock is gone TTL after it was acquired), Wait and Observer
// (its roundTrips are the Redis round trips), with their defaults.
type Options struct {
	lock.Options
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
	// after it the lease is lost with lock.ErrMaxHold.
	MaxHold time.Duration
	// FenceFloor, when set, is asked for the highest fencing token the
	// protected storage has seen, only when Redis has no fencing counter for
	// the key (first use, or after Redis lost its data), so tokens never go
	// backwards.
	FenceFloor func(ctx context.Context, key string) (int64, error)

	// noTurns lets every Lock call of a key contend in Redis at once, as
	// before local turns: for the tests of the notifier's own queue of
	// parked waiters, which turns keep to one per key and process.
	noTurns bool
}

// ErrNoOwner: a Reentrant lock was asked for without lock.WithOwner in the
// context. The package's other errors are lock's, wrapped in *lock.Error.
var ErrNoOwner = errors.New("no lock owner in context")
