package lock

import (
	"context"
	"time"
)

// Locker takes locks by name. Implementations are safe for concurrent use.
type Locker interface {
	// Lock acquires key, waiting while it is held for at most the Locker's
	// wait budget (Options.Wait) and never past ctx. Giving up returns an
	// error wrapping ErrTimeout and the context's error
	// (context.DeadlineExceeded for the budget). The lease's Context
	// derives from ctx.
	Lock(ctx context.Context, key string) (Lease, error)
	// TryLock makes one attempt and never waits: an error wrapping
	// ErrNotAcquired when key is held.
	TryLock(ctx context.Context, key string) (Lease, error)
}

// Lease is one successful Lock or TryLock: the proof of holding a lock for
// as long as its Context is not cancelled.
type Lease interface {
	// Key is the name the lock was taken by.
	Key() string
	// Fence is the acquisition's fencing token: larger than every earlier
	// holder's of the same key from the same counter (Fence.Backend).
	// Write it with the protected data and have the storage refuse a token
	// below the highest it has seen.
	Fence() Fence
	// Context derives from the ctx given to Lock and is cancelled the
	// moment the lock is known or presumed lost (cause wrapping ErrLost and
	// the reason) and on Release (cause wrapping ErrReleased). Run the
	// protected work under it.
	Context() context.Context
	// Done is Context().Done().
	Done() <-chan struct{}
	// Err is nil while the lease holds, else why not: the loss (wrapping
	// ErrLost) or ErrReleased.
	Err() error
	// Release gives the lock up. nil: released. ErrLost: the lease had been
	// lost before (the work done under it may not have been exclusive).
	// ErrNotHeld: the backend no longer had this hold, or the lease was
	// already released. ErrReleaseUnknown: the outcome is unknown; the
	// backend frees the lock by its TTL at the latest. The lease's Context
	// is cancelled in every case.
	Release(ctx context.Context) error
}

// Fence is a fencing token together with the counter that minted it:
// tokens of one Backend and key only grow from holder to holder; tokens of
// two Backends say nothing about each other, so store each Backend's in a
// place of its own.
type Fence struct {
	Backend string // the counter: the backend's name, e.g. "etcdlock", "redislock/fair"
	Token   int64
}

// Options is what every Locker is configured with. The zero value works;
// a backend that needs more has an Options of its own that embeds this one.
type Options struct {
	// TTL bounds how long a holder that stopped talking to the backend
	// (crashed, paused, cut off) keeps the others out: the lease time of a
	// Redis key or lock row, the etcd lease, the ZooKeeper session
	// timeout; default 30s. Each backend's doc says what renews it.
	TTL time.Duration
	// Wait bounds how long Lock waits for a held lock, on top of ctx;
	// default 10s.
	Wait time.Duration
	// Observer receives events for metrics; nil means none.
	Observer Observer
}

// WithDefaults is o with the documented defaults in its zero fields.
func (o Options) WithDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	if o.Wait <= 0 {
		o.Wait = 10 * time.Second
	}
	return o
}

// WaitContext is ctx bounded by the wait budget for a Lock (wait true); a
// TryLock (wait false) never waits, and gets ctx itself.
func (o Options) WaitContext(ctx context.Context, wait bool) (context.Context, context.CancelFunc) {
	if !wait {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, o.Wait)
}

// Observer receives lock events, e.g. to export metrics. Implementations
// must be safe for concurrent use and must not block.
type Observer interface {
	// Acquired reports one Lock or TryLock call: nil on success, else the
	// error returned; how long it waited; the requests it made to the
	// backend's servers.
	Acquired(key string, err error, wait time.Duration, roundTrips int)
	// Renewed reports one renewal of a held lease by a backend that renews
	// (a watchdog): nil on success. Backends that do not renew never call it.
	Renewed(key string, err error)
	// Lost reports a lease lost while held, with the cause (wrapping ErrLost).
	Lost(key string, reason error)
	// Released reports a release and how long the lock was held.
	Released(key string, held time.Duration, err error)
}
