package stock

import (
	"context"
	"fmt"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
	"inventory/internal/redis"
)

// Orders takes the steps of an order's life after its hold: pay, cancel,
// refund, ship (Step), and the expiry job's sweep (Sweep). A step runs
// under a lock bound to the order, which only serialises the callers that
// contend for one order (a buyer's double click, a payment provider's
// retry, the shop shipping); what happens is decided by Postgres, by a
// guarded write (postgres.Store.Transition), so a step is right even when
// the lock is broken or absent. A step that gives units back makes every
// replica forget that the product was sold out before it answers
// (Restocker.Reopen).
type Orders struct {
	Store *postgres.Store
	// Lock, when set, is the lock steps of one order take; nil: none.
	Lock lock.Locker
	// Returns reopens a product whose units come back (Restocker.Reopen).
	Returns Restocker
	// Instance names this replica in each order's history.
	Instance string
}

// sweepLimit bounds the orders of one product one sweep transaction expires.
const sweepLimit = 1000

// Get returns order id with its history.
func (s Orders) Get(ctx context.Context, id string) (inventory.OrderRecord, error) {
	return s.Store.Order(ctx, id)
}

// Step takes step a of order id under the order's lock, and returns the
// order after it (see postgres.Store.Transition: a repeat answers the
// order as it is; ErrOrderExpired, ErrOrderState, ErrOrderNotFound).
func (s Orders) Step(ctx context.Context, id string, a inventory.Action) (inventory.OrderRecord, error) {
	if err := inventory.ValidateOrderID(id); err != nil {
		return inventory.OrderRecord{}, err
	}
	if a == inventory.Expire {
		return inventory.OrderRecord{}, fmt.Errorf("%w: an order expires by the expiry job only", inventory.ErrBadAction)
	}
	if s.Lock == nil {
		return s.Store.Transition(ctx, id, a, s.Instance, s.Returns.Reopen)
	}
	lease, err := s.Lock.Lock(ctx, redis.OrderLockKey(id))
	if err != nil {
		return inventory.OrderRecord{}, lockErr(err)
	}
	defer release(ctx, lease)
	r, err := s.Store.Transition(lease.Context(), id, a, s.Instance, s.Returns.Reopen)
	return r, lost(lease, err)
}

// Sweep expires the held orders past their deadline and gives their units
// back, as the expiry job's runner holding fence (see
// postgres.Store.ExpireDue: a runner whose lease is over is refused).
func (s Orders) Sweep(ctx context.Context, fence lock.Fence) (int, error) {
	return s.Store.ExpireDue(ctx, fence, "expiry@"+s.Instance, sweepLimit, s.Returns.Reopen)
}
