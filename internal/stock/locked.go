package stock

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
	"inventory/internal/redis"
	"inventory/internal/tracing"
)

// locked is the one sale of every safe lock strategy: the product's lock
// serialises the buyers, and Postgres has the last word. It takes the lock
// (waiting up to the locker's wait budget, else ErrLockTimeout), then, in
// one transaction under the lease's context, claims the stock row with the
// lease's fencing token (in the fence of the token's own counter, see
// ClaimFence), reads, checks, works, decrements guarded and records the
// sale, and releases the lock only after the commit. A lease lost meanwhile cancels the transaction
// (ErrLockLost); a stale holder that slips past that (a pause) is refused
// by the fence or the guard (ErrLockBreach), never an oversell.
type locked struct {
	d    Deps
	name string      // the strategy, as the ledger names it
	lk   lock.Locker // the product's lock
	// held, when set, runs the sale once the lock is held, in place of
	// record (the reentrant strategy re-enters its lock there).
	held func(ctx context.Context, lease lock.Lease, o inventory.Order) (inventory.Sale, error)
}

// newLocked is lock strategy name's locked sale under its locker
// (Deps.Lockers[name]), or ErrNotConfigured without one.
func newLocked(d Deps, name string) (*locked, error) {
	lk, err := d.locker(name)
	if err != nil {
		return nil, err
	}
	return &locked{d: d, name: name, lk: lk}, nil
}

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *locked) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

func (s *locked) sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	// An unknown product must not get a lock, a fencing key, a node or a row.
	if err := s.d.Store.Exists(ctx, o.ProductID); err != nil {
		return inventory.Sale{}, err
	}
	// The lock wait's span ends with the wait; the sale's transaction is
	// the sale span's child, not the lock's.
	_, span := tracing.Span(ctx, "lock.acquire")
	lease, err := s.lk.Lock(ctx, redis.LockKey(o.ProductID))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("inventory.lock.key", redis.LockKey(o.ProductID)))
		if err == nil {
			f := lease.Fence()
			span.SetAttributes(attribute.String("inventory.fence.backend", f.Backend), attribute.Int64("inventory.fence", f.Token))
		}
	}
	tracing.End(span, err)
	if err != nil {
		return inventory.Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, s.name, lease.Fence().Token)
	held := s.held
	if held == nil {
		held = s.record
	}
	sale, err := held(lease.Context(), lease, o)
	return hold.done(sale, lost(lease, err))
}

// record is the sale's transaction under lease: claim, check, work,
// guarded decrement, ledger row, commit.
func (s *locked) record(ctx context.Context, lease lock.Lease, o inventory.Order) (inventory.Sale, error) {
	return s.d.Store.Record(ctx, o, s.name, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, lease.Fence(), s.d.WorkDelay)
	})
}

var _ inventory.Seller = (*locked)(nil)
