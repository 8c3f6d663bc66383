package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/tracing"
)

// optimistic reads stock and version, then decrements only if the version is
// unchanged, retrying with jittered backoff when another sale got there
// first: safe, a stale read can never be written.
type optimistic struct {
	d Deps
}

func newOptimistic(d Deps) *optimistic { return &optimistic{d: d} }

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *optimistic) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell tries compare-and-set sales, each its own short transaction, until one
// wins, the stock runs out (ErrSoldOut), or the Deps.Wait budget or ctx
// ends (ErrContention): buyers keep their chance while stock remains, rather
// than being turned away after a fixed few losses.
func (s *optimistic) sell(ctx context.Context, o Order) (Sale, error) {
	deadline := time.Now().Add(budget(s.d))
	tries := 0
	defer func() { tracing.Attempts(ctx, tries) }()
	for attempt := 0; ; attempt++ {
		tries = attempt + 1
		sale, err := s.d.Store.record(ctx, o, Optimistic, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
			q, v, err := t.read(ctx)
			if err != nil {
				return decrement{}, err
			}
			if err := checkThenWork(ctx, o.ProductID, q, o.Quantity, s.d.WorkDelay); err != nil {
				return decrement{}, err
			}
			return t.decrementIfVersion(ctx, o.Quantity, v)
		})
		if !errors.Is(err, errVersionConflict) {
			return sale, err
		}
		if s.d.OnConflict != nil {
			s.d.OnConflict()
		}
		wait := backoff(attempt, s.d.MinBackoff, s.d.MaxBackoff)
		if time.Now().Add(wait).After(deadline) {
			return Sale{}, fmt.Errorf("%w: %d compare-and-set attempts on %q lost within %v", ErrContention, attempt+1, o.ProductID, budget(s.d))
		}
		if err := pause(ctx, wait); err != nil {
			return Sale{}, fmt.Errorf("%w: %w", ErrContention, err)
		}
	}
}

var _ Seller = (*optimistic)(nil)
