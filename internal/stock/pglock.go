package stock

import (
	"context"

	"inventory/internal/lock/pglock"
)

// pgLock runs read-check-update inside a lock held in a Postgres table
// (pglock, row lock:{id}) released by token after the commit: safe, the
// write is fenced with the lock's token (compared with the other pglock
// holders', in stock.pglock_fence) and guarded, so when the lock breaks (a
// pause past its TTL) Postgres refuses the stale write and the breach is
// reported instead of an oversell.
type pgLock struct {
	d  Deps
	lk *pglock.Locker
}

func newPgLock(d Deps) *pgLock {
	return &pgLock{d: d, lk: pglock.New(d.Store.pool, pglock.Options{
		Options:    d.Lock.Options, // TTL, Wait, Observer
		MinBackoff: d.Lock.MinBackoff,
		MaxBackoff: d.Lock.MaxBackoff,
	})}
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *pgLock) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's lock row (waiting up to Deps.Lock.Wait, else
// ErrLockTimeout), then claims, reads, checks, works, decrements and
// records the sale under the lease's context, and releases the lock only
// after the commit. A section that outlives the TTL is cancelled and rolled
// back; a stale holder that slips past that (a pause) is refused by the fence.
func (s *pgLock) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get a row in the locks table.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, PgLock, lease.Fence().Token)
	sale, err := s.d.Store.record(lease.Context(), o, PgLock, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, pglockFence, lease.Fence().Token, s.d.WorkDelay)
	})
	return hold.done(sale, lost(lease, err))
}

var _ Seller = (*pgLock)(nil)
