package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/backend"
	"inventory/internal/lock/backends"
	"inventory/internal/postgres"
)

// lockBackends are the lock backends the service configures and opens:
// the one list of them (backends.All), the only place that names them.
var lockBackends = backends.All()

// openLockers opens every backend of list that needs no setting or whose
// setting cfg has, all with the configured TTL and wait and obs for
// metrics, and gives each lock strategy (stock.Deps.Lockers) a Locker of
// the lock its Info names. A strategy whose backend is not open gets none
// (it is then unavailable). closeAll closes them all; call it after the
// drain, so that in-flight sales release their locks first.
func openLockers(ctx context.Context, cfg config, list []backend.Descriptor, pool *pgxpool.Pool, rdb redis.UniversalClient,
	store *postgres.Store, obs lock.Observer, log *slog.Logger) (lockers map[string]lock.Locker, closeAll func(), err error) {
	open := map[string]backend.Lockers{}
	var order []backend.Lockers
	closeAll = func() {
		for _, o := range slices.Backward(order) {
			o.Close()
		}
	}
	for _, d := range list {
		value, set := cfg.Backends[d.Setting]
		if d.Setting != "" && !set {
			continue
		}
		o, err := d.Open(ctx, backend.Config{
			Setting:    value,
			Options:    lock.Options{TTL: cfg.LockTTL, Wait: cfg.LockWait, Observer: obs},
			Postgres:   pool,
			Redis:      rdb,
			FenceFloor: store.FenceFloor,
			Log:        log,
		})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("open lock backend %s: %w", d.Name, err)
		}
		open[d.Name] = o
		order = append(order, o)
	}
	lockers = map[string]lock.Locker{}
	for _, info := range inventory.Strategies {
		if info.Lock == "" {
			continue
		}
		o := open[info.LockBackend()]
		if o == nil {
			if !slices.ContainsFunc(list, func(d backend.Descriptor) bool { return d.Name == info.LockBackend() }) {
				closeAll()
				return nil, nil, fmt.Errorf("strategy %q takes its lock from %q, of a backend not in the list of lock backends", info.Name, info.Lock)
			}
			continue // not configured: the strategy is unavailable
		}
		l, err := o.Locker(info.LockKind())
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("strategy %q: %w", info.Name, err)
		}
		lockers[info.Name] = l
	}
	return lockers, closeAll, nil
}
