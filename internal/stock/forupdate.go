package stock

import (
	"context"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// forUpdate locks the product's row with SELECT ... FOR UPDATE, then checks
// and decrements: safe, concurrent sales of one product queue on the row lock
// (the baseline).
type forUpdate struct {
	d Deps
}

func newForUpdate(d Deps) *forUpdate { return &forUpdate{d: d} }

// Sell reads the stock under its row lock, refuses with ErrSoldOut when too
// little is left, does the simulated work, then decrements and records the
// sale; the row lock is held until the commit.
func (s *forUpdate) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	return s.d.Store.Record(ctx, o, inventory.ForUpdate, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
		q, err := t.ReadForUpdate(ctx)
		if err != nil {
			return postgres.Decrement{}, err
		}
		if err := checkThenWork(ctx, o.ProductID, q, o.Quantity, s.d.WorkDelay); err != nil {
			return postgres.Decrement{}, err
		}
		// The row lock makes the check reliable; the write is guarded all
		// the same, as every safe strategy's is.
		return t.DecrementIfEnough(ctx, o.Quantity)
	})
}

var _ inventory.Seller = (*forUpdate)(nil)
