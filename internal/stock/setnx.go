package stock

import (
	"context"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
	"inventory/internal/redis"
)

// setNX runs none's read-check-update, unguarded and unfenced, inside the
// seeds' naive Redis lock (SETNX, then PEXPIRE, unconditional DEL; its
// locker's leases have no fence and never learn of a loss): NOT safe. It
// holds while every critical section ends within the TTL; once one
// outlives it (slow work, a pause, TTL set too short), the next buyer
// takes the lock while the first still works, the first one's DEL frees
// the lock under the second, and their sales of the same units all land
// (oversell).
type setNX struct {
	d  Deps
	mu lock.Locker
}

func newSetNX(d Deps) (*setNX, error) {
	mu, err := d.locker(inventory.SetNX)
	if err != nil {
		return nil, err
	}
	return &setNX{d: d, mu: mu}, nil
}

// Sell takes the product's naive lock (waiting up to its locker's wait
// budget, else ErrLockTimeout), sells like none, and deletes the lock key
// after the commit, whoever holds it by then.
func (s *setNX) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	lease, err := s.mu.Lock(ctx, redis.SetNXKey(o.ProductID))
	if err != nil {
		return inventory.Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	section := s.d.Holds.Begin(o.ProductID, inventory.SetNX, 0)
	return section.done(s.d.Store.Record(ctx, o, inventory.SetNX, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
		return checkThenDecrement(ctx, t, o.Quantity, s.d)
	}))
}

var _ inventory.Seller = (*setNX)(nil)
