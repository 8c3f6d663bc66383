package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// LockExpiredEarly is lock-expired-early: the product's lock is taken from
// its holder while the holder is inside its critical section, as if its
// lease had expired early (a clock jump, an eviction, a lease the server
// let go), three times in a row, each time under a new holder. Wherever the
// lock lives:
//
//   - Redis (the fleet's, and every Redlock server's): the lock key is
//     deleted, only if it still carries the holder's value (or owner field).
//   - etcd: the holder's key (the lowest create revision under
//     etcdLockPrefix+name+"/") is deleted, only if it still has that
//     create revision: what etcd does to it when its lease expires. The
//     holder's watch cancels its lease, and the next waiter takes over.
//   - ZooKeeper: the holder's node (zkHolder: the lowest sequence under
//     zkLockRoot+"/"+name) is deleted, as its session's expiry
//     would. The holder's watch on it cancels its lease.
//   - pglock: the holder's row is made to look expired (expires_at set to
//     Postgres' now, token and fence kept), not deleted: deleting it would
//     restart the lock's fence at 1, below what the pglock fence has seen,
//     and the database would refuse every later holder of the product for
//     good, which is not an early expiry but a lost fence. An expired row is
//     what a lease that ended early looks like on Postgres' clock: the next
//     acquirer takes it over with fence+1. The holder cannot notice before
//     its own deadline (a pglock lease ends on a local timer and never reads
//     the row back); it learns at Release, which answers ErrNotHeld once the
//     row was taken over, and the fence orders its write before the next
//     holder's.
//
// name is the lock's name, lockName(product). The strategies that take no
// lock (Strategy.LockBackend says which do) are not applicable; one that
// does but whose lock Inject cannot find within lookFor was not struck
// (ErrNotStruck), and its run is tried again.
type LockExpiredEarly struct {
	// Settle, when positive, is how long an etcd or ZooKeeper holder must
	// have been the oldest before it is struck, instead of 10ms: a test
	// whose holders keep their locks until they lose them can afford far
	// more than a busy machine's scheduling delay.
	Settle time.Duration
}

// lookFor bounds how long Inject looks for a lock before deciding the
// strategy keeps none (and, after a deletion, for the next holder).
const lookFor = time.Second

// deletions is how many holders lose their lock in one run.
const deletions = 3

// Name implements Fault.
func (*LockExpiredEarly) Name() string { return "lock-expired-early" }

// Scope implements Scoped.
func (*LockExpiredEarly) Scope() Scope { return ScopeProduct }

// AppliesTo implements Applicable: the strategies that take a lock of a
// lock backend (kept in Redis, etcd, ZooKeeper or the locks table).
func (*LockExpiredEarly) AppliesTo(t Target) error {
	return appliesTo(t, func(s Strategy) bool { return s.LockBackend != "" }, "its sale takes no lock")
}

// Inject implements Fault.
func (f *LockExpiredEarly) Inject(ctx context.Context, t Target) error {
	stores, err := openLockStores(ctx, t.Fleet)
	if err != nil {
		return fmt.Errorf("lock-expired-early: %w", err)
	}
	defer closeLockStores(stores)
	var (
		struck []string  // the holders whose lock was taken, so each one is new
		found  lockStore // where the first one was: the strategy's lock lives there
	)
	for len(struck) < deletions {
		wctx, cancel := context.WithTimeout(ctx, lookFor)
		var h lockHolder
		err := waitFor(wctx, t, "a lock of "+t.Product, func(ctx context.Context) (bool, error) {
			for _, s := range stores {
				if found != nil && s != found {
					continue
				}
				var ok bool
				var err error
				if h, ok, err = s.holder(ctx, t.Product); err != nil || ok {
					if err != nil {
						return false, fmt.Errorf("%s: %w", s.name(), err)
					}
					if slices.Contains(struck, h.id) {
						return false, nil // the same holder, still: wait for the next
					}
					found = s
					return true, nil
				}
			}
			return false, nil
		})
		// A look that ran into lookFor's deadline can fail with the backend's
		// own error (etcd's gRPC status, "Unknown: context deadline
		// exceeded", from the server's copy of the deadline) rather than
		// DeadlineExceeded, and before wctx's own timer has run on a busy
		// machine: read the clock, not only wctx.Err.
		deadline, _ := wctx.Deadline()
		lookedLongEnough := err != nil && (wctx.Err() != nil || !time.Now().Before(deadline))
		cancel()
		switch {
		case (lookedLongEnough || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrMissed)) && ctx.Err() == nil && len(struck) == 0:
			return fmt.Errorf("no lock of %s in Redis, etcd, ZooKeeper or the locks table for %v or until the buyers finished: %w",
				t.Product, lookFor, ErrNotStruck)
		case len(struck) > 0 && err != nil && ctx.Err() == nil:
			return nil // the buyers are done, or no new holder came: the holders seen lost their locks
		case err != nil:
			return err
		}
		if h.settle > 0 && f.Settle > 0 {
			h.settle = f.Settle
		}
		if h.settle > 0 {
			if err := hold(ctx, h.settle); err != nil {
				return err
			}
			again, ok, err := found.holder(ctx, t.Product)
			if err != nil {
				return fmt.Errorf("lock-expired-early: %s: %w", found.name(), err)
			}
			if !ok || again.id != h.id {
				continue // it let go meanwhile: look for the next one
			}
		}
		taken, err := h.take(ctx)
		if err != nil {
			return fmt.Errorf("lock-expired-early: %s: %w", found.name(), err)
		}
		if taken { // else the holder let go first: look for the next one
			struck = append(struck, h.id)
		}
	}
	return nil
}

// Heal implements Fault: the holders notice on their own (a failed renewal,
// a watch on their key or node, a release that finds the row taken over,
// a refused fence); nothing to restore.
func (*LockExpiredEarly) Heal(context.Context) error { return nil }
