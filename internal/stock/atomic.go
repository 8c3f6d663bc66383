package stock

import (
	"context"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// atomicUpdate sells with one conditional UPDATE ... WHERE quantity >= n: safe, the
// check and the decrement are one statement under the row lock (the baseline).
type atomicUpdate struct {
	d Deps
}

func newAtomic(d Deps) *atomicUpdate { return &atomicUpdate{d: d} }

// Sell decrements only if enough stock is left, and records the sale in the
// same transaction; no row updated means sold out (or an unknown product).
func (s *atomicUpdate) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	return s.d.Store.Record(ctx, o, inventory.Atomic, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
		return t.DecrementIfEnough(ctx, o.Quantity)
	})
}

var _ inventory.Seller = (*atomicUpdate)(nil)
