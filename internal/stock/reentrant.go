package stock

import (
	"context"

	"github.com/google/uuid"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// reentrant sells under a re-entrant Redis hash lock with a watchdog (see
// fencedSale): the request's owner travels in its context (lock.WithOwner), and
// the sale takes the lock again inside the first hold, as nested code of one
// request would, incrementing the hold instead of deadlocking. Safe: the
// transaction runs under the lease's context, a sale whose lock was lost is
// rolled back, and a stale holder's write is fenced (the product's redislock
// fence, shared with redis and handoff) and guarded by Postgres (a breach,
// never an oversell).
type reentrant struct {
	*fencedSale
}

func newReentrant(d Deps) (*reentrant, error) {
	l, err := newFencedSale(d, inventory.Reentrant)
	if err != nil {
		return nil, err
	}
	l.reenters = true
	return &reentrant{l}, nil
}

// Sell sells o as the owner in ctx (lock.WithOwner), or a new one.
func (s *reentrant) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	if _, ok := lock.OwnerFrom(ctx); !ok {
		ctx = lock.WithOwner(ctx, uuid.NewString())
	}
	return s.fencedSale.Sell(ctx, o)
}

var _ inventory.Seller = (*reentrant)(nil)
