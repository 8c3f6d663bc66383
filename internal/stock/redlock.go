package stock

import (
	"context"

	"inventory/internal/lock/redlock"
)

// redLock runs read-check-update inside a Redlock (lock:{id} on a majority
// of N independent Redis servers) released by compare-and-delete after the
// commit: safe, the write is fenced with the lock's token (a counter kept
// on a majority of the servers, never restarted below what Postgres has
// seen; stock.redlock_fence) and guarded, so when Redlock breaks (a server
// restarted empty while held, a pause past the validity) Postgres refuses
// the stale or duplicate write and the breach is reported instead of an
// oversell.
type redLock struct {
	d  Deps
	lk *redlock.Locker
}

func newRedlock(d Deps) *redLock {
	return &redLock{d: d, lk: redlock.New(d.Redlock, redlock.Options{
		Options:    d.Lock.Options, // TTL, Wait, Observer
		MinBackoff: d.Lock.MinBackoff,
		MaxBackoff: d.Lock.MaxBackoff,
		FenceFloor: fenceFloor(d.Store, redlockFence),
	})}
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *redLock) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's Redlock (waiting up to Deps.Lock.Wait, else
// ErrLockTimeout), then claims, reads, checks, works, decrements and
// records the sale under the lease's context, and releases the lock only
// after the commit. A section that outlives the validity is cancelled and
// rolled back; a second holder let in by a restarted server, or a stale one
// that slips past the cancel (a pause), is refused by the fence.
func (s *redLock) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get lock or fencing keys on the servers.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, Redlock, lease.Fence().Token)
	sale, err := s.d.Store.record(lease.Context(), o, Redlock, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, redlockFence, lease.Fence().Token, s.d.WorkDelay)
	})
	return hold.done(sale, lost(lease, err))
}

var _ Seller = (*redLock)(nil)
