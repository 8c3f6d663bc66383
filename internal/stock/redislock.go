package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/lock"
)

// redisLock runs the classic read-check-update inside a Redis SET NX PX lock
// (lock:{id}) released by compare-and-delete after the commit: safe while the
// replicas are not paused past the lock's TTL, as nothing renews the lock or
// fences the write (a section that merely overruns is rolled back).
type redisLock struct {
	d  Deps
	mu *lock.Mutex
}

func newRedisLock(d Deps) *redisLock {
	opts := d.Lock
	// This strategy is the plain lock, lease time and nothing else; the
	// reentrant strategy is the one with a watchdog and fencing.
	opts.Watchdog = false
	return &redisLock{d: d, mu: lock.NewMutex(d.Redis, opts)}
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *redisLock) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's lock (waiting up to Deps.Lock.Wait, else
// ErrLockTimeout), then reads, checks, works, decrements and records the sale,
// and releases the lock only after the commit.
func (s *redisLock) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get a lock or fencing key in Redis.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	lease, err := s.mu.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	// Under the lease's context, a critical section that outlives the TTL is
	// cancelled and rolled back instead of committing after someone else may
	// have taken the lock. A pause past the TTL can still slip a write
	// through: nothing fences it (the reentrant strategy does).
	sale, err := s.d.Store.record(lease.Context(), o, RedisLock, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		d, err := checkThenDecrement(ctx, t, o.Quantity, s.d)
		// Recorded for the ledger's sake only: nothing checks it.
		d.fence = lease.Fence()
		return d, err
	})
	if err != nil {
		return Sale{}, lost(lease, err)
	}
	return sale, nil
}

// releaseTimeout bounds giving a lock up, which runs even when the buyer's
// context has ended.
const releaseTimeout = 5 * time.Second

// release gives the lease up after the sale is settled. Its error is
// dropped: the sale's outcome is already decided, and a lock whose release
// failed expires by its TTL.
func release(ctx context.Context, lease *lock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = lease.Release(rctx)
}

// lockErr translates an error from taking a lock.
func lockErr(err error) error {
	switch {
	case errors.Is(err, lock.ErrTimeout):
		return fmt.Errorf("%w: %w", ErrLockTimeout, err)
	case errors.Is(err, lock.ErrLost):
		return fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	return redisErr("lock", err)
}

var _ Seller = (*redisLock)(nil)
