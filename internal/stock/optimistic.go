package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock/localqueue"
	"inventory/internal/postgres"
	"inventory/internal/tracing"
)

// optimistic reads stock and version, then decrements only if the version is
// unchanged, retrying with jittered backoff when another sale got there
// first: safe, a stale read can never be written. A replica's buyers of one
// product take turns in memory, so that compare-and-set races are only
// between replicas.
type optimistic struct {
	d Deps
	// turns queues a replica's buyers per product: only the first in a
	// product's queue reads and compare-and-sets; the others wait in
	// memory without touching Postgres. Without it, every buyer in flight
	// attempted at once, all but one lost each round, and the losers'
	// backoff grew until a crowd of 1,500 could run out of its wait
	// budget with units still unsold (issue 38).
	turns localqueue.Queues
}

func newOptimistic(d Deps) *optimistic { return &optimistic{d: d} }

// Sell waits for its turn among this replica's buyers of the product, then
// tries compare-and-set sales, each its own short transaction, until one
// wins, the stock runs out (ErrSoldOut), or the Deps.Wait budget or ctx
// ends (ErrContention): the budget covers the wait for the turn and the
// attempts together. Buyers keep their chance while stock remains, rather
// than being turned away after a fixed few losses.
func (s *optimistic) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	began := time.Now()
	deadline := began.Add(budget(s.d))
	tries := 0
	defer func() { tracing.Attempts(ctx, tries) }()
	turnCtx, cancel := context.WithDeadline(ctx, deadline)
	leave, err := s.turns.Wait(turnCtx, o.ProductID)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return inventory.Sale{}, fmt.Errorf("%w: waiting for a turn at %q: %w", inventory.ErrContention, o.ProductID, ctx.Err())
		}
		return inventory.Sale{}, fmt.Errorf("%w: no turn at %q's compare-and-set within %v", inventory.ErrContention, o.ProductID, budget(s.d))
	}
	defer leave()
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
		// Only another replica can have won: this one's other buyers
		// wait behind this one.
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
