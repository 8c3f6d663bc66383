package stock

import (
	"context"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// none reads, checks and decrements with no coordination at all: NOT safe,
// concurrent buyers who read the same stock all sell it (oversell).
type none struct {
	d Deps
}

func newNone(d Deps) *none { return &none{d: d} }

// Sell reads the stock, refuses with ErrSoldOut when too little is left, does
// the simulated work, and then decrements and records the sale.
func (s *none) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	return s.d.Store.Record(ctx, o, inventory.None, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
		return checkThenDecrement(ctx, t, o.Quantity, s.d)
	})
}

// checkThenDecrement is the classic read-check-update, unguarded by itself:
// none, local and redis run it as is, and rely on their locks (or nothing)
// to keep two buyers out of it at once.
func checkThenDecrement(ctx context.Context, t *postgres.SaleTx, n int64, d Deps) (postgres.Decrement, error) {
	q, _, err := t.Read(ctx)
	if err != nil {
		return postgres.Decrement{}, err
	}
	if err := checkThenWork(ctx, t.ProductID(), q, n, d.WorkDelay); err != nil {
		return postgres.Decrement{}, err
	}
	return t.DecrementBy(ctx, n)
}

var _ inventory.Seller = (*none)(nil)
