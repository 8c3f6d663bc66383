package stock

import (
	"context"

	"inventory/internal/lock/redislock"
)

// fair runs read-check-update inside the FIFO Redis lock (redislock.Fair on
// lock:{id}): buyers of a product get the lock in the order they asked for
// it, each woken in turn. Safe: the write is fenced with the lock's own
// token (stock.fair_fence) and guarded, so when the lock breaks (a pause
// past its TTL, Redis losing the key) Postgres refuses the stale write and
// the breach is reported instead of an oversell.
type fair struct {
	d  Deps
	lk *redislock.Fair
}

func newFair(d Deps) *fair {
	opts := d.Lock
	// A watchdog keeps a slow sale's lock (a crowd queues on the hot row)
	// and tells the holder within TTL/3 when its key is gone, instead of
	// at the end of the TTL.
	opts.Watchdog = true
	opts.FenceFloor = fenceFloor(d.Store, fairFence)
	return &fair{d: d, lk: redislock.NewFair(d.Redis, opts)}
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *fair) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell queues for the product's lock (waiting up to Deps.Lock.Wait, else
// ErrLockTimeout, leaving the queue), then claims, reads, checks, works,
// decrements and records the sale under the lease's context, and releases
// the lock only after the commit, which wakes the next in line. A lost lock
// cancels the section and rolls it back; a stale holder that slips past
// that (a pause) is refused by the fence.
func (s *fair) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get a lock, queue or fencing key in Redis.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, Fair, lease.Fence().Token)
	sale, err := s.d.Store.record(lease.Context(), o, Fair, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, fairFence, lease.Fence().Token, s.d.WorkDelay)
	})
	return hold.done(sale, lost(lease, err))
}

var _ Seller = (*fair)(nil)
