package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"inventory/internal/fleet"
	"inventory/internal/lock/breaker"
	"inventory/internal/lock/etcdlock/etcdbreak"
	"inventory/internal/lock/pglock/pgbreak"
	"inventory/internal/lock/redislock/redisbreak"
	"inventory/internal/lock/redlock/redlockbreak"
	"inventory/internal/lock/zklock/zkbreak"
)

// LockExpiredEarly is lock-expired-early: the product's lock is taken from
// its holder while the holder is inside its critical section, as if its
// lease had expired early (a clock jump, an eviction, a lease the server
// let go), three times in a row, each time under a new holder. Wherever the
// lock lives, its backend's Breaker (lockBreakers) finds the holder and
// takes the lock as that backend's own expiry would: the key deleted in
// Redis (on every Redlock server that has it), the holder's key in etcd,
// its node in ZooKeeper, its row of the locks table made to look expired
// (each breaker's package says how, and why).
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

// lockBreakers are the breakers of the lock backends whose locks a fleet
// keeps (each backend's knowledge of where its locks live and how to take
// one): the fault looks for a product's lock in every one the fleet has.
var lockBreakers = []breaker.Breaker{
	redisbreak.Breaker,
	redlockbreak.Breaker,
	etcdbreak.Breaker,
	zkbreak.Breaker,
	pgbreak.Breaker,
}

// lockStore is one backend's open breaker.
type lockStore struct {
	backend, where string
	breaker.Locks
}

// openLockStores connects to every place the fleet can keep a lock in.
func openLockStores(ctx context.Context, f *fleet.Fleet) ([]lockStore, error) {
	servers := breaker.Servers{Postgres: f.PostgresURL, Redis: f.RedisURL, Settings: f.LockSettings()}
	var stores []lockStore
	for _, b := range lockBreakers {
		l, ok, err := b.Open(ctx, servers)
		if err != nil {
			closeLockStores(stores)
			return nil, fmt.Errorf("%s: %w", b.Backend, err)
		}
		if ok {
			stores = append(stores, lockStore{b.Backend, b.Where, l})
		}
	}
	return stores, nil
}

func closeLockStores(stores []lockStore) {
	for _, s := range stores {
		s.Close()
	}
}

// lockName is the name every lock strategy gives a product's lock (stock's
// lockKey): the Redis key, the etcd key's and ZooKeeper path's last part,
// the locks table's row.
func lockName(product string) string { return "lock:{" + product + "}" }

// Inject implements Fault.
func (f *LockExpiredEarly) Inject(ctx context.Context, t Target) error {
	stores, err := openLockStores(ctx, t.Fleet)
	if err != nil {
		return fmt.Errorf("lock-expired-early: %w", err)
	}
	defer closeLockStores(stores)
	var (
		struck []string // the holders whose lock was taken, so each one is new
		found  = -1     // where the first one was (stores' index): the strategy's lock lives there
	)
	for len(struck) < deletions {
		wctx, cancel := context.WithTimeout(ctx, lookFor)
		var h breaker.Holder
		err := waitFor(wctx, t, "a lock of "+t.Product, func(ctx context.Context) (bool, error) {
			for i, s := range stores {
				if found >= 0 && i != found {
					continue
				}
				var ok bool
				var err error
				if h, ok, err = s.Holder(ctx, lockName(t.Product)); err != nil || ok {
					if err != nil {
						return false, fmt.Errorf("%s: %w", s.backend, err)
					}
					if slices.Contains(struck, h.ID) {
						return false, nil // the same holder, still: wait for the next
					}
					found = i
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
			return fmt.Errorf("no lock of %s in %s for %v or until the buyers finished: %w",
				t.Product, storeNames(stores), lookFor, ErrNotStruck)
		case len(struck) > 0 && err != nil && ctx.Err() == nil:
			return nil // the buyers are done, or no new holder came: the holders seen lost their locks
		case err != nil:
			return err
		}
		if h.Settle > 0 && f.Settle > 0 {
			h.Settle = f.Settle
		}
		if h.Settle > 0 {
			if err := sleep(ctx, h.Settle); err != nil {
				return err
			}
			again, ok, err := stores[found].Holder(ctx, lockName(t.Product))
			if err != nil {
				return fmt.Errorf("lock-expired-early: %s: %w", stores[found].backend, err)
			}
			if !ok || again.ID != h.ID {
				continue // it let go meanwhile: look for the next one
			}
		}
		taken, err := h.Take(ctx)
		if err != nil {
			return fmt.Errorf("lock-expired-early: %s: %w", stores[found].backend, err)
		}
		if taken { // else the holder let go first: look for the next one
			struck = append(struck, h.ID)
		}
	}
	return nil
}

// Heal implements Fault: the holders notice on their own (a failed renewal,
// a watch on their key or node, a release that finds the row taken over,
// a refused fence); nothing to restore.
func (*LockExpiredEarly) Heal(context.Context) error { return nil }

// storeNames says where stores look, for an error: "Redis, etcd or the
// locks table".
func storeNames(stores []lockStore) string {
	names := make([]string, len(stores))
	for i, s := range stores {
		names[i] = s.where
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
