package stock

import (
	"context"

	"inventory/internal/inventory"
)

// atomicUpdate sells with one conditional UPDATE ... WHERE quantity >= n: safe, the
// check and the decrement are one statement under the row lock (the baseline).
type atomicUpdate struct {
	d Deps
}

func newAtomic(d Deps) *atomicUpdate { return &atomicUpdate{d: d} }

// Sell decrements only if enough stock is left, and records the sale in the
// same statement, one round trip (postgres.Store.SellGuarded); no row
// updated means sold out (or an unknown product).
func (s *atomicUpdate) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	return s.d.Store.SellGuarded(ctx, o, inventory.Atomic, s.d.Instance, 0)
}

var _ inventory.Seller = (*atomicUpdate)(nil)
