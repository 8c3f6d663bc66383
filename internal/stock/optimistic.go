package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/tracing"
)

// optimistic reads stock and version, then decrements only if the version is
// unchanged, retrying with jittered backoff when another sale got there
// first: safe, a stale read can never be written.
type optimistic struct {
	d Deps
}

func newOptimistic(d Deps) *optimistic { return &optimistic{d: d} }

// Sell tries compare-and-set sales, each its own short transaction, until one
// wins, the stock runs out (ErrSoldOut), or the Deps.Wait budget or ctx
// ends (ErrContention): buyers keep their chance while stock remains, rather
// than being turned away after a fixed few losses.
func (s *optimistic) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	deadline := time.Now().Add(budget(s.d))
	tries := 0
	defer func() { tracing.Attempts(ctx, tries) }()
	for attempt := 0; ; attempt++ {
		tries = attempt + 1
		sale, err := s.d.Store.Record(ctx, o, inventory.Optimistic, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
			q, v, err := t.Read(ctx)
			if err != nil {
				return postgres.Decrement{}, err
			}
			if err := checkThenWork(ctx, o.ProductID, q, o.Quantity, s.d.WorkDelay); err != nil {
				return postgres.Decrement{}, err
			}
			return t.DecrementIfVersion(ctx, o.Quantity, v)
		})
		if !errors.Is(err, postgres.ErrVersionConflict) {
			return sale, err
		}
		if s.d.OnConflict != nil {
			s.d.OnConflict()
		}
		wait := backoff(attempt, s.d.MinBackoff, s.d.MaxBackoff)
		if time.Now().Add(wait).After(deadline) {
			return inventory.Sale{}, fmt.Errorf("%w: %d compare-and-set attempts on %q lost within %v", inventory.ErrContention, attempt+1, o.ProductID, budget(s.d))
		}
		if err := inventory.Sleep(ctx, wait); err != nil {
			return inventory.Sale{}, fmt.Errorf("%w: %w", inventory.ErrContention, err)
		}
	}
}

var _ inventory.Seller = (*optimistic)(nil)
