package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/redis"
	"inventory/internal/tracing"
)

// fencedSale is the one sale of every safe lock strategy: the product's lock
// serialises the buyers, and Postgres has the last word. It takes the lock
// (waiting up to the locker's wait budget, else ErrLockTimeout), then, in
// one transaction under the lease's context, claims the stock row with the
// lease's fencing token (in the fence of the token's own counter, see
// ClaimFence), reads, checks, works, decrements guarded and records the
// sale, and releases the lock only after the commit. A lease lost
// meanwhile cancels the transaction (ErrLockLost); a stale holder that
// slips past that (a pause) is refused by the fence or the guard
// (ErrLockBreach), never an oversell. One sale serves every Locker: a
// strategy reads the same whichever backend holds its lock.
type fencedSale struct {
	d    Deps
	name string      // the strategy, as the ledger names it
	lk   lock.Locker // the product's lock
	// reenters: the sale takes its lock again inside the hold, as nested
	// code of one request would (the reentrant strategy: its count goes to
	// 2, and the inner release leaves the outer hold in place).
	reenters bool
}

// newFencedSale is lock strategy name's fenced sale under its locker
// (Deps.Lockers[name]), or ErrNotConfigured without one.
func newFencedSale(d Deps, name string) (*fencedSale, error) {
	lk, err := d.locker(name)
	if err != nil {
		return nil, err
	}
	return &fencedSale{d: d, name: name, lk: lk}, nil
}

// Sell takes o's product lock and sells o under it (see fencedSale).
func (s *fencedSale) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
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
	section := s.d.Holds.Begin(o.ProductID, s.name, lease.Fence().Token)
	held := lease
	if s.reenters {
		if held, err = s.lk.Lock(lease.Context(), redis.LockKey(o.ProductID)); err != nil {
			return section.done(inventory.Sale{}, lost(lease, lockErr(err)))
		}
		defer release(ctx, held)
	}
	// The transaction runs under the lease's context: a lost lease cancels it.
	sale, err := s.d.Store.SellFenced(held.Context(), o, s.name, s.d.Instance, held.Fence(), s.d.WorkDelay)
	return section.done(sale, lost(lease, lost(held, err))) // held is lease unless the sale re-entered
}

var _ inventory.Seller = (*fencedSale)(nil)

// lost turns a failed sale into ErrLockLost when the lease was lost meanwhile
// (the failure is then its consequence: a cancelled query, say). A breach
// keeps its own error, a commit whose outcome is unknown stays
// ErrUnavailable (it may have sold), and nil (a sale that committed) stays nil.
func lost(l lock.Lease, err error) error {
	if err == nil || errors.Is(err, inventory.ErrLockLost) || errors.Is(err, inventory.ErrLockBreach) || errors.Is(err, inventory.ErrOutcomeUnknown) {
		return err
	}
	if lerr := l.Err(); lerr != nil && !errors.Is(lerr, lock.ErrReleased) {
		return fmt.Errorf("%w: %w; the sale was rolled back: %w", inventory.ErrLockLost, lerr, err)
	}
	return err
}

// releaseTimeout bounds giving a lock up, which runs even when the buyer's
// context has ended.
const releaseTimeout = 5 * time.Second

// release gives the lease up after the sale is settled. Its error is
// dropped: the sale's outcome is already decided, and a lock whose release
// failed expires by its TTL.
func release(ctx context.Context, l lock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = l.Release(rctx)
}

// lockErr translates an error from taking a lock, of any backend, by the
// lock contract's kind alone: a timeout, a loss, and the backend's servers
// failing (or its locker closed) the same way for all. The error names
// the backend it comes from (lock.Error).
func lockErr(err error) error {
	switch {
	case errors.Is(err, lock.ErrTimeout):
		return fmt.Errorf("%w: %w", inventory.ErrLockTimeout, err)
	case errors.Is(err, lock.ErrLost):
		return fmt.Errorf("%w: %w", inventory.ErrLockLost, err)
	case errors.Is(err, lock.ErrUnavailable), errors.Is(err, lock.ErrClosed):
		return fmt.Errorf("lock: %w: %w", inventory.ErrUnavailable, err)
	}
	return fmt.Errorf("lock: %w", err)
}
