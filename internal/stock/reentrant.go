package stock

import (
	"context"

	"github.com/google/uuid"

	"inventory/internal/lock/redislock"
)

// reentrant sells under a re-entrant Redis hash lock with a watchdog, running
// the transaction under the lease's context and fencing and guarding the
// write: safe, a sale whose lock was lost is rolled back, and a stale
// holder's write is refused by Postgres (a breach, never an oversell).
type reentrant struct {
	d  Deps
	lk *redislock.Reentrant
}

func newReentrant(d Deps) *reentrant {
	opts := d.Lock
	// Fencing tokens must keep rising even when Redis lost its counter:
	// start above the highest token Postgres has seen.
	opts.FenceFloor = fenceFloor(d.Store, redisFence)
	return &reentrant{d: d, lk: redislock.NewReentrant(d.Redis, opts)}
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *reentrant) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's lock as the request's owner (redislock.OwnerFrom(ctx),
// else a fresh one for this Sell) and sells under it with sellHeld, which
// re-enters the same lock; the lock is released after the commit. A lost lock
// rolls the sale back with ErrLockLost.
func (s *reentrant) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get a lock or fencing key in Redis.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	if _, ok := redislock.OwnerFrom(ctx); !ok {
		ctx = redislock.WithOwner(ctx, uuid.NewString())
	}
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, Reentrant, lease.Fence().Token)
	sale, err := s.sellHeld(lease.Context(), o)
	return hold.done(sale, lost(lease, err))
}

// sellHeld checks, works, decrements and records o under the product's lock
// for the owner in ctx: it takes the lock, re-entering it when this owner
// already holds it (as Sell does), so it can run on its own or nested in
// other work under the same lock. The stock write is fenced with the lease's
// token. It does not validate o or look up its idempotency key; Sell does.
func (s *reentrant) sellHeld(ctx context.Context, o Order) (Sale, error) {
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	sale, err := s.d.Store.record(lease.Context(), o, Reentrant, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, redisFence, lease.Fence().Token, s.d.WorkDelay)
	})
	if err != nil {
		return Sale{}, lost(lease, err)
	}
	return sale, nil
}

var _ Seller = (*reentrant)(nil)
