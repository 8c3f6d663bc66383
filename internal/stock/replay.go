package stock

import (
	"context"
	"errors"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// replaying wraps every strategy (New): it validates each order and
// refuses one for an unknown product (ErrNotFound), so that neither changes
// anything, and sells each at most once per idempotency key. When an order carries a key that an earlier sale used, it answers
// that sale (Replayed) or ErrIdempotencyConflict without selling. A
// duplicate racing that check is caught by the ledger's unique key inside
// the strategy's transaction (postgres.Store.Record); and a duplicate told
// ErrSoldOut because the units it saw missing were the ones its twin was
// selling gets the twin's sale instead.
type replaying struct {
	store *postgres.Store
	next  inventory.Seller
}

// Sell validates o, and answers a replay from the ledger, or finds o's
// product and sells o by the wrapped strategy.
func (r replaying) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	if err := o.Validate(); err != nil {
		return inventory.Sale{}, err
	}
	if o.IdempotencyKey != "" {
		if earlier, found, err := r.store.Replay(ctx, o); err != nil || found {
			return earlier, err
		}
	}
	// An unknown product must get no lock, fencing key, node, counter or row.
	if err := r.store.Exists(ctx, o.ProductID); err != nil {
		return inventory.Sale{}, err
	}
	sale, err := r.next.Sell(ctx, o)
	if errors.Is(err, inventory.ErrSoldOut) && o.IdempotencyKey != "" {
		if earlier, found, rerr := r.store.Replay(ctx, o); found {
			return earlier, rerr
		}
	}
	return sale, err
}

var _ inventory.Seller = replaying{}
