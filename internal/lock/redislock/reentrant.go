package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
)

// Reentrant is a re-entrant Redis lock: a hash {owner → hold count} whose
// owner comes from the context (lock.WithOwner), so nested code of one request
// re-enters instead of deadlocking. Each outermost hold has one watchdog
// that renews it every TTL/3 while held. Create one per process and share
// it; it is safe for concurrent use. Owners are scoped to it: the same owner
// name used through two Reentrant values (or two processes) contends.
type Reentrant struct {
	base

	mu      sync.Mutex
	entries map[entryKey]*entry
}

type entryKey struct{ key, owner string }

// entry is one owner's state for one key in this process.
type entry struct {
	users int           // operations in flight, plus one while a hold exists; guarded by Reentrant.mu
	sem   chan struct{} // serialises the owner's operations on the key; guards the rest

	h     *hold // the current hold, nil when none
	keys  []string
	ch    string // the release channel
	count int    // nested leases not yet released
	seq   int64  // last operation id sent for h
}

// NewReentrant returns a Reentrant lock over rdb; see Options for the
// defaults. Options.Watchdog is implied.
func NewReentrant(rdb redis.UniversalClient, opts Options) *Reentrant {
	opts.Watchdog = true
	return &Reentrant{base: newBase(rdb, opts), entries: map[entryKey]*entry{}}
}

// Close stops the subscription that wakes waiters, as Mutex.Close does.
func (r *Reentrant) Close() { r.close() }

// Lock acquires key for the owner in ctx (ErrNoOwner without one), or
// re-enters it if the owner holds it already, incrementing its count and
// returning a lease with the same fence. It waits like Mutex.Lock. Re-entry
// into a hold that has been lost fails with lock.ErrLost until the owner has
// released all its leases on it.
func (r *Reentrant) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, r.opts.Observer, key, "lock", true, r.attempt)
}

// TryLock is Lock without waiting: lock.ErrNotAcquired if another owner holds
// key, or if this owner is itself in the middle of acquiring it.
func (r *Reentrant) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, r.opts.Observer, key, "trylock", false, r.attempt)
}

func (r *Reentrant) use(k entryKey) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[k]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		r.entries[k] = e
	}
	e.users++
	return e
}

func (r *Reentrant) unuse(k entryKey, e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.users--; e.users == 0 {
		delete(r.entries, k)
	}
}

func (r *Reentrant) attempt(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	owner, ok := lock.OwnerFrom(ctx)
	if !ok {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: ErrNoOwner}
	}
	fk, err := fenceKey(key)
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
	}
	k := entryKey{key, owner}
	e := r.use(k)
	defer r.unuse(k, e)
	// One budget for the whole call: the wait for the owner's turn at key
	// (its other operation there is brief, or a Lock bounded by its own
	// Wait), then the re-entry or the wait for the lock. Each with a Wait
	// of its own, a Lock behind the same owner's Lock that gave up waited
	// twice Wait.
	wctx, cancel := r.opts.WaitContext(ctx, wait)
	defer cancel()
	if wait {
		select {
		case e.sem <- struct{}{}:
		case <-wctx.Done():
			return nil, timeoutError(op, key, wctx)
		}
	} else {
		select {
		case e.sem <- struct{}{}:
		default:
			return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: fmt.Errorf("%w: owner %q is acquiring it concurrently", lock.ErrNotAcquired, owner)}
		}
	}
	defer func() { <-e.sem }()

	if e.h != nil {
		return r.reenter(ctx, wctx, op, k, e, trips)
	}
	ch, err := releaseChannel(key)
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
	}
	keys := []string{key, fk}
	token := newToken()
	// The owner holds no hold here: it takes the process's turn at key,
	// behind the other owners' Lock calls (a re-entry above never waits
	// for a turn: its owner already has it).
	leave, err := r.turn(wctx, op, key, wait)
	if err != nil {
		return nil, err
	}
	h := newHold(Backend, key, token, &r.opts, func(ctx context.Context) (bool, error) {
		v, _, err := redisscript.Run(ctx, r.rdb, reentrantRenew, keys[:1], token, ms(r.opts.TTL))
		return v == int64(1), err
	})
	fence, sent, err := grant(wctx, &r.opts, op, key, wait, trips, r.notify, r.cleanups, ch,
		func(ctx context.Context, floor string) (any, int, error) {
			return redisscript.Run(ctx, r.rdb, reentrantAcquire, keys, owner, token, ms(r.opts.TTL), floor)
		},
		func(ctx context.Context) {
			_, _, _ = redisscript.Run(ctx, r.rdb, reentrantRelease, keys, owner, token, "0", "1", ch)
		})
	if err != nil {
		leave()
		return nil, err
	}
	h.leave = leave
	h.arm(sent, fence)
	e.h, e.keys, e.ch, e.count, e.seq = h, keys, ch, 1, 0
	r.use(k) // the hold keeps the entry until its last release
	return r.lease(ctx, k, e, h, owner), nil
}

func (r *Reentrant) lease(ctx context.Context, k entryKey, e *entry, h *hold, owner string) *Lease {
	l := h.addLease(ctx, func(ctx context.Context, l *Lease) error { return r.release(ctx, l, k, e) })
	l.owner = owner
	return l
}

// reenter increments the count of the hold e has, by a script bounded by
// wctx; the lease derives from ctx. Called with e.sem held.
func (r *Reentrant) reenter(ctx, wctx context.Context, op string, k entryKey, e *entry, trips *int) (*Lease, error) {
	h := e.h
	if err := h.err(); err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: k.key, Err: fmt.Errorf("re-entry: %w", err)}
	}
	e.seq++
	sent := time.Now()
	v, n, err := redisscript.Run(wctx, r.rdb, reentrantEnter, e.keys[:1], k.owner, h.token, ms(r.opts.TTL), strconv.FormatInt(e.seq, 10))
	*trips += n
	if err != nil {
		// If it ran, Redis counts one more than we do; harmless, as the
		// last release deletes the hold whatever the count.
		return nil, tryError(wctx, op, k.key, err)
	}
	if c, ok := v.(int64); !ok || c < 0 {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: k.key, Err: fmt.Errorf("%w: %v", errUnexpectedReply, v)}
	} else if c == 0 {
		cause := &lock.Error{Backend: Backend, Op: op, Key: k.key, Err: fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrNotHeld)}
		h.lose(cause)
		return nil, cause
	}
	h.extend(sent)
	e.count++
	return r.lease(ctx, k, e, h, k.owner), nil
}

func (r *Reentrant) release(ctx context.Context, l *Lease, k entryKey, e *entry) error {
	if o, ok := lock.OwnerFrom(ctx); ok && o != l.owner {
		return &lock.Error{Backend: Backend, Op: "release", Key: k.key, Err: fmt.Errorf("%w: owner %q does not hold it", lock.ErrNotHeld, o)}
	}
	// Only brief operations hold e.sem while a lease exists (re-entries and
	// releases), so this waits regardless of ctx.
	e.sem <- struct{}{}
	defer func() { <-e.sem }()
	h := l.h
	h.dropLease(l)
	if _, err := l.BeginRelease(); err != nil {
		return err
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	e.count--
	var err error
	if e.count > 0 {
		err = r.releaseNested(ctx, k, e)
	} else {
		lost := h.end() // the watchdog has stopped when this returns
		v, _, rerr := redisscript.Run(ctx, r.rdb, reentrantRelease, e.keys, k.owner, h.token, "0", "1", e.ch)
		h.leaveTurn() // after the key is gone: the next local owner finds it free
		err = l.ReleaseError(lost, rerr, v == int64(0))
		e.h = nil
		r.unuse(k, e)
	}
	return l.EndRelease(err)
}

func (r *Reentrant) releaseNested(ctx context.Context, k entryKey, e *entry) error {
	h := e.h
	if lost := h.err(); lost != nil {
		return &lock.Error{Backend: Backend, Op: "release", Key: k.key, Err: fmt.Errorf("lease was lost before release: %w", lost)}
	}
	e.seq++
	v, _, err := redisscript.Run(ctx, r.rdb, reentrantRelease, e.keys, k.owner, h.token, strconv.FormatInt(e.seq, 10), "0", e.ch)
	switch {
	case err != nil:
		return &lock.Error{Backend: Backend, Op: "release", Key: k.key, Err: fmt.Errorf("%w: %w", lock.ErrReleaseUnknown, err)}
	case v == int64(-1):
		cause := &lock.Error{Backend: Backend, Op: "release", Key: k.key, Err: fmt.Errorf("%w: %w", lock.ErrLost, lock.ErrNotHeld)}
		h.lose(cause)
		return cause
	}
	return nil
}

// releaseContext is ctx, or when ctx is already done a short detached one:
// a release abandoned because the request ended would leave the key to
// block everyone else until its TTL.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

var _ lock.Locker = (*Reentrant)(nil)
