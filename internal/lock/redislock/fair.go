package redislock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
)

// Fair is a first-come, first-served Redis lock: a waiter takes a place in
// the lock's queue (a sorted set scored by a ticket from a counter) and is
// woken when its turn comes, by a notice that names it; nobody, not even a
// holder that releases and locks again at once, goes ahead of an earlier
// waiter. Each queue entry has a lease on Redis' clock (3 × PollInterval)
// that the waiter refreshes every PollInterval or so while it waits, so a
// waiter whose process died is dropped by the next acquire or release once
// its lease has run out. The holder's lease is the Mutex's: TTL, renewed by
// a watchdog with Options.Watchdog, cancelling Lease.Context when lost. Its
// fencing tokens come from a counter of its own (not the Mutex's), with
// Options.FenceFloor when Redis lost it. Create one per process and share
// it; it is safe for concurrent use.
//
// Its keys are companions of the lock key, in the same Redis Cluster slot
// (for "lock:{sku-1}": "lock:{sku-1}:fair" holder, ":fair:queue",
// ":fair:lease", ":fair:fence"), so a Fair lock and a Mutex of one key do
// not exclude each other.
type Fair struct{ base }

// NewFair returns a Fair lock over rdb; see Options for the defaults. Of
// Options it uses TTL, Wait, Watchdog, MaxHold, FenceFloor, Observer,
// PollInterval (a waiter's re-check and lease refresh; its entry's lease is
// three times that) and PollOnly with MinBackoff and MaxBackoff (waiters
// re-check with backoff instead of waiting for their notice; they still
// acquire in queue order).
func NewFair(rdb redis.UniversalClient, opts Options) *Fair {
	return &Fair{newBase(rdb, opts)}
}

// Close stops the subscription that wakes waiters, if one is running (it
// also stops by itself a few seconds after the last waiter), and waits for
// its goroutine to exit, and for the queue cleanups still running after
// Locks that gave up (each at most 2s). The lock stays usable: held leases
// can be released, and later waiters re-check with backoff.
func (f *Fair) Close() { f.close() }

// Lock acquires key in its turn: when the lock is free and nobody queues
// for it, at once; else it queues behind the waiters already there and
// waits to be woken, for at most Options.Wait and never past ctx. Giving up
// leaves the queue and returns *lock.Error wrapping lock.ErrTimeout and ctx.Err() (or
// context.DeadlineExceeded for the Wait budget); a Redis failure returns
// *lock.Error wrapping it.
func (f *Fair) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, f.opts.Observer, key, "lock", true, f.attempt)
}

// TryLock acquires key only if it is free and nobody queues for it; it
// never queues and never waits: *lock.Error wrapping lock.ErrNotAcquired otherwise.
func (f *Fair) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, f.opts.Observer, key, "trylock", false, f.attempt)
}

// fairKeys are a Fair lock's Redis keys, in the order of the scripts' KEYS,
// and its wake channel.
type fairKeys struct {
	keys    []string // holder, queue, leases, fence
	channel string
}

func fairKeysFor(key string) (fairKeys, error) {
	var k fairKeys
	for _, suffix := range []string{"fair", "fair:queue", "fair:lease", "fair:fence"} {
		name, err := companion(key, suffix)
		if err != nil {
			return fairKeys{}, err
		}
		k.keys = append(k.keys, name)
	}
	var err error
	k.channel, err = companion(key, "fair:wake")
	return k, err
}

// waiterLease is how long a queue entry lasts on Redis' clock unless its
// waiter refreshes it, which it does at least every PollInterval (or
// MaxBackoff when PollOnly) while alive.
func (o Options) waiterLease() time.Duration { return 3 * max(o.PollInterval, o.MaxBackoff) }

func (f *Fair) attempt(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	k, err := fairKeysFor(key)
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
	}
	token := newToken()
	var renew func(context.Context) (bool, error)
	if f.opts.Watchdog {
		renew = func(ctx context.Context) (bool, error) {
			// The holder key is a string "<token>:<fence>", as a Mutex's.
			v, _, err := redisscript.Run(ctx, f.rdb, mutexRenew, k.keys[:1], token, ms(f.opts.TTL))
			return v == int64(1), err
		}
	}
	h := newHold(FairBackend, key, token, &f.opts, renew)
	fence, sent, err := f.queue(ctx, k, token, op, key, wait, trips)
	if err != nil {
		return nil, err
	}
	h.arm(sent, fence)
	return h.addLease(ctx, func(ctx context.Context, l *Lease) error {
		return f.release(ctx, l, fairRelease, k.keys, token, k.channel)
	}), nil
}

// queue runs the acquire script until it grants the lock: the first try
// that does not grant it (with wait) puts token in the queue, and each
// later one refreshes the entry's lease. Between tries the waiter is
// parked until a notice names it, its subscription is confirmed (a notice
// may have come before it), or a timed re-check is due: after [½, 1] ×
// PollInterval, or just after the holder's remaining TTL when it is next in
// line (the key may expire without a release). It returns the fence and
// when the granting command was sent. On every other way out it leaves the
// queue (and frees a lock granted by a try whose reply was lost), so that
// the waiters behind it do not wait for it.
func (f *Fair) queue(ctx context.Context, k fairKeys, token, op, key string, wait bool, trips *int) (int64, time.Time, error) {
	o := &f.opts
	floor := o.startFloor()
	lease := "" // TryLock never queues
	wctx := ctx
	if wait {
		lease = strconv.FormatInt(ms(o.waiterLease()), 10)
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	var w *waiter // joined after the first try that queued
	// queued: a try may have put token in the queue, or granted it the lock
	// without our knowing (its reply was lost); granted: a reply said so.
	queued, granted := false, false
	defer func() {
		if w != nil {
			w.leave()
		}
		if queued && !granted {
			*trips++
			f.cleanups.Run(wctx, func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(cleanupTimeout, o.TTL))
				defer cancel()
				_, _, _ = redisscript.Run(cctx, f.rdb, fairRelease, k.keys, token, k.channel)
			})
		}
	}()
	bo := newBackoff(o.MinBackoff, o.MaxBackoff)
	var timer *time.Timer
	defer func() { stopTimer(timer) }()
	for {
		r, sent, err := tryScript(wctx, o, op, key, &floor, trips,
			func(ctx context.Context, floor string) (any, int, error) {
				return redisscript.Run(ctx, f.rdb, fairAcquire, k.keys, token, ms(o.TTL), floor, lease, k.channel)
			},
			func() { queued = true })
		if err != nil {
			return 0, time.Time{}, err
		}
		switch {
		case r[0] == 1 && len(r) >= 2:
			granted = true
			return r[1], sent, nil
		case r[0] != 0 || len(r) < 3:
			return 0, time.Time{}, &lock.Error{Backend: Backend, Op: op, Key: key, Err: fmt.Errorf("%w: %v", errUnexpectedReply, r)}
		}
		if !wait {
			return 0, time.Time{}, &lock.Error{Backend: Backend, Op: op, Key: key, Err: lock.ErrNotAcquired}
		}
		queued = true
		if w == nil && f.notify != nil {
			if w = f.notify.joinAddressed(k.channel, token); w != nil && w.ready == nil {
				// Already subscribed, but our notice may have come between
				// the try and joining: try again, now sure to hear the next.
				continue
			}
		}
		var d time.Duration
		if w != nil {
			d = o.PollInterval/2 + rand.N(o.PollInterval/2+1)
			if pttl := time.Duration(r[1]) * time.Millisecond; r[2] == 0 && pttl > 0 && pttl < d {
				d = pttl + rand.N(pttl/8+time.Millisecond)
			}
		} else {
			d = bo.next()
		}
		if !waitForNextTry(wctx, w, &timer, d) {
			return 0, time.Time{}, timeoutError(op, key, wctx)
		}
	}
}

var _ lock.Locker = (*Fair)(nil)
