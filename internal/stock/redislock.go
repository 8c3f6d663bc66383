package stock

import (
	"context"

	"inventory/internal/lock/redislock"
)

// redisLock runs read-check-update inside a Redis SET NX PX lock
// (lock:{id}) released by compare-and-delete after the commit: safe, the
// write is fenced with the lock's token and guarded, so when the lock breaks
// (a pause past its TTL, Redis losing the key) Postgres refuses the stale
// write and the breach is reported instead of an oversell.
type redisLock struct {
	d  Deps
	mu *redislock.Mutex
}

func newRedisLock(d Deps) *redisLock {
	opts := d.Lock
	// This strategy is the plain lock: lease time and nothing else renews
	// it (the reentrant strategy has the watchdog).
	opts.Watchdog = false
	opts.FenceFloor = fenceFloor(d.Store, redisFence)
	return &redisLock{d: d, mu: redislock.NewMutex(d.Redis, opts)}
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *redisLock) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's lock (waiting up to Deps.Lock.Wait, else
// ErrLockTimeout), then claims, reads, checks, works, decrements and records
// the sale under the lease's context, and releases the lock only after the
// commit. A section that outlives the TTL is cancelled and rolled back; a
// stale holder that slips past that (a pause) is refused by the fence.
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
	hold := s.d.Holds.Begin(o.ProductID, RedisLock, lease.Fence().Token)
	sale, err := s.d.Store.record(lease.Context(), o, RedisLock, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, redisFence, lease.Fence().Token, s.d.WorkDelay)
	})
	return hold.done(sale, lost(lease, err))
}

var _ Seller = (*redisLock)(nil)
