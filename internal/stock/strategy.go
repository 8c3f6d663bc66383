package stock

import (
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
)

// notConfigured is New's error for a strategy whose locker Deps lacks.
func notConfigured(info inventory.Info) error {
	if info.Needs == "" {
		return fmt.Errorf("%w: strategy %q needs its locker in Deps.Lockers", inventory.ErrNotConfigured, info.Name)
	}
	return fmt.Errorf("%w: strategy %q needs %s, which is not set", inventory.ErrNotConfigured, info.Name, info.Needs)
}

// Deps is what the strategies need. Store, Redis and Instance are required;
// every other field's zero value works.
type Deps struct {
	Store    *postgres.Store
	Redis    goredis.UniversalClient
	Instance string
	// Lockers are the lock strategies' locks, by strategy name: each
	// strategy whose Info names a Lock takes a product's lock from its own
	// Locker of that lock (cmd/inventory opens them from the lock
	// backends' descriptors), with the TTL, wait budget and renewal it was
	// built with. A strategy without one is not available: New returns
	// ErrNotConfigured. The fenced ones need tokens that only grow per
	// counter (lock.Fence.Backend), counters that can be lost restarted
	// above Store.FenceFloor.
	Lockers map[string]lock.Locker
	// Wait is the budget within which optimistic and lua keep trying a
	// sale that lost a race; default 10s.
	Wait time.Duration
	// MinBackoff and MaxBackoff bound optimistic's jittered backoff
	// between attempts; defaults 1ms and 32ms.
	MinBackoff, MaxBackoff time.Duration
	// WorkDelay is simulated business work, slept between the read/check and
	// the write wherever a strategy has that gap; it widens races for demos.
	WorkDelay time.Duration
	// OnConflict, when set, is called each time an optimistic attempt loses
	// its compare-and-set, for metrics.
	OnConflict func()
	// Holds records every critical section held under a lock strategy's
	// lock (local, setnx and the safe lock strategies; one per batch for
	// handoff), so overlapping holders can be measured; nil: not recorded.
	Holds *HoldLog
}

// locker is lock strategy name's locker, or ErrNotConfigured.
func (d Deps) locker(name string) (lock.Locker, error) {
	if lk := d.Lockers[name]; lk != nil {
		return lk, nil
	}
	info, err := inventory.Lookup(name)
	if err != nil {
		return nil, err
	}
	return nil, notConfigured(info)
}

// seller is s as a Seller, or nil and err: a nil *T in a Seller would not
// be a nil Seller.
func seller[S inventory.Seller](s S, err error) (inventory.Seller, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// New builds the strategy called name, wrapped so that it validates every
// order and sells each at most once per idempotency key (replaying). Each
// call makes an independent seller: build each strategy once per process
// (the local strategy's mutexes live in it).
func New(name string, d Deps) (inventory.Seller, error) {
	if d.Store == nil || d.Redis == nil || d.Instance == "" {
		return nil, fmt.Errorf("stock.New(%q): Deps needs Store, Redis and Instance", name)
	}
	s, err := build(name, d)
	if err != nil {
		return nil, err
	}
	return replaying{store: d.Store, next: s}, nil
}

// build is the one list that builds each strategy by name, one line each
// (inventory.Strategies says what each one is): adding a strategy = its
// file, its line here and its Info there.
func build(name string, d Deps) (inventory.Seller, error) {
	switch name {
	case inventory.None:
		return newNone(d), nil
	case inventory.Local:
		return newLocal(d), nil
	case inventory.SetNX:
		return seller(newSetNX(d))
	case inventory.RedisLock:
		return seller(newRedisLock(d))
	case inventory.Reentrant:
		return seller(newReentrant(d))
	case inventory.Fair:
		return seller(newFair(d))
	case inventory.Redlock:
		return seller(newRedlock(d))
	case inventory.Etcd:
		return seller(newEtcdLock(d))
	case inventory.ZooKeeper:
		return seller(newZooKeeper(d))
	case inventory.PgLock:
		return seller(newPgLock(d))
	case inventory.Optimistic:
		return newOptimistic(d), nil
	case inventory.Lua:
		return newLua(d), nil
	case inventory.Atomic:
		return newAtomic(d), nil
	case inventory.ForUpdate:
		return newForUpdate(d), nil
	case inventory.Batch:
		return newBatch(d), nil
	case inventory.Handoff:
		return seller(newHandoff(d))
	}
	_, err := inventory.Lookup(name)
	return nil, err
}
