package stock

import (
	"context"
)

// forUpdate locks the product's row with SELECT ... FOR UPDATE, then checks
// and decrements: safe, concurrent sales of one product queue on the row lock
// (the baseline).
type forUpdate struct {
	d Deps
}

func newForUpdate(d Deps) *forUpdate { return &forUpdate{d: d} }

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *forUpdate) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell reads the stock under its row lock, refuses with ErrSoldOut when too
// little is left, does the simulated work, then decrements and records the
// sale; the row lock is held until the commit.
func (s *forUpdate) sell(ctx context.Context, o Order) (Sale, error) {
	return s.d.Store.record(ctx, o, ForUpdate, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		q, err := t.readForUpdate(ctx)
		if err != nil {
			return decrement{}, err
		}
		if err := checkThenWork(ctx, o.ProductID, q, o.Quantity, s.d.WorkDelay); err != nil {
			return decrement{}, err
		}
		// The row lock makes the check reliable; the write is guarded all
		// the same, as every safe strategy's is.
		return t.decrementIfEnough(ctx, o.Quantity)
	})
}

var _ Seller = (*forUpdate)(nil)
