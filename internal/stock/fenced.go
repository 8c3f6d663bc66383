package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
)

// What the safe lock strategies share (see locked): the lock serialises the
// buyers, and Postgres has the last word. The transaction claims the stock
// row with the lease's fencing token before it reads, and its write is
// guarded; a write that only a broken lock could have let through is
// refused and reported as ErrLockBreach.

// fencedCheckThenDecrement is a lock holder's transaction: claim the row
// with the lease's fencing token (refused by Postgres when a holder with the
// same or a newer token got there first; see ClaimFence), then check, work,
// and decrement guarded. Under the claim's row lock the checked quantity
// cannot change, so a guard refusal here also means the lock broke.
func fencedCheckThenDecrement(ctx context.Context, t *postgres.SaleTx, n int64, fence lock.Fence, work time.Duration) (postgres.Decrement, error) {
	q, _, err := t.ClaimFence(ctx, fence)
	if err != nil {
		return postgres.Decrement{}, err
	}
	if err := checkThenWork(ctx, t.ProductID(), q, n, work); err != nil {
		return postgres.Decrement{}, err
	}
	d, err := t.DecrementIfEnough(ctx, n)
	if errors.Is(err, inventory.ErrSoldOut) {
		err = fmt.Errorf("%w: the stock changed under the lock after its check: %w", inventory.ErrLockBreach, err)
	}
	d.Fence = fence.Token
	return d, err
}

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
