package stock

import (
	"context"
	"errors"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
	"inventory/internal/redis"
)

// handoff is the Redis lock with a local queue (seed 003): in each replica
// only one goroutine per product contends for the product's lock; the other
// buyers wait in the replica's queue, and the holder sells for the whole
// queue in one critical section and one transaction. Safe like redis: the
// transaction claims the stock row with the lease's fencing token, the write
// is guarded, and a broken lock is caught by Postgres as a breach.
//
// The simulated work (Deps.WorkDelay) is spent once per critical section.
type handoff struct {
	d  Deps
	mu lock.Locker // the plain lock, as redis's: the lease time bounds a holder
}

func newHandoff(d Deps) (*batch, error) {
	mu, err := d.locker(inventory.Handoff)
	if err != nil {
		return nil, err
	}
	h := &handoff{d: d, mu: mu}
	return newQueued(d, h.sellBatch), nil
}

// sellBatch takes product id's lock, sells orders under it (sellHeld) and
// releases the lock after the commit.
func (h *handoff) sellBatch(ctx context.Context, id string, orders []inventory.Order) []postgres.BatchAnswer {
	lease, err := h.mu.Lock(ctx, redis.LockKey(id))
	if err != nil {
		return postgres.AnswerAll(orders, lockErr(err))
	}
	defer release(ctx, lease)
	section := h.d.Holds.Begin(id, inventory.Handoff, lease.Fence().Token)
	answers := h.sellHeld(lease, id, orders)
	section.End(batchOutcome(answers))
	return answers
}

// sellHeld is the critical section: work, then sell orders in one fenced
// transaction under the lease's context.
func (h *handoff) sellHeld(lease lock.Lease, id string, orders []inventory.Order) []postgres.BatchAnswer {
	if err := inventory.Sleep(lease.Context(), h.d.WorkDelay); err != nil {
		return postgres.AnswerAll(orders, lost(lease, err))
	}
	answers := h.d.Store.RecordBatch(lease.Context(), id, inventory.Handoff, h.d.Instance, lease.Fence(), orders)
	for i, a := range answers {
		// An order that did not fit was answered by a transaction that
		// committed; anything else may be the lost lock's doing.
		if a.Err != nil && !errors.Is(a.Err, inventory.ErrSoldOut) {
			answers[i].Err = lost(lease, a.Err)
		}
	}
	return answers
}
