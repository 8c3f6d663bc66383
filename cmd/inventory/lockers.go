package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/pglock"
	"inventory/internal/lock/redislock"
	"inventory/internal/lock/redlock"
	"inventory/internal/lock/zklock"
	"inventory/internal/stock"
)

// openLockers builds the lock strategies' lockers (stock.Deps.Lockers),
// each as its strategy's doc asks, all with the configured TTL and wait
// and obs for metrics. Redlock, etcd and ZooKeeper get one only when
// configured. closeAll closes them all; call it after the drain, so that
// in-flight sales release their locks first.
func openLockers(ctx context.Context, cfg config, pool *pgxpool.Pool, rdb redis.UniversalClient, store *stock.Store, obs lock.Observer, log *slog.Logger) (lockers map[string]lock.Locker, closeAll func(), err error) {
	base := lock.Options{TTL: cfg.LockTTL, Wait: cfg.LockWait, Observer: obs}
	// Redis's fencing counters restart above what Postgres has seen.
	redisOpts := func(counter string, watchdog bool) redislock.Options {
		return redislock.Options{Options: base, Watchdog: watchdog, FenceFloor: store.FenceFloor(counter)}
	}
	// redis and handoff: the plain lock, bounded by its lease time. The
	// reentrant and fair locks renew theirs (a crowd queues on the hot row)
	// and learn within TTL/3 that their key is gone.
	mutex := redislock.NewMutex(rdb, redisOpts(redislock.Backend, false))
	handoff := redislock.NewMutex(rdb, redisOpts(redislock.Backend, false))
	reentrant := redislock.NewReentrant(rdb, redisOpts(redislock.Backend, true))
	fair := redislock.NewFair(rdb, redisOpts(redislock.FairBackend, true))
	// pglock releases a lock whose outcome was unknown in the background;
	// Close waits for those releases.
	pl := pglock.New(pool, pglock.Options{Options: base})
	closers := []func(){mutex.Close, handoff.Close, reentrant.Close, fair.Close, pl.Close}
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	lockers = map[string]lock.Locker{
		stock.SetNX:     redislock.NewSetNX(rdb, redislock.Options{Options: base}).Locker(),
		stock.RedisLock: mutex,
		stock.Handoff:   handoff,
		stock.Reentrant: reentrant,
		stock.Fair:      fair,
		stock.PgLock:    pl,
	}
	if eps := cfg.etcdEndpoints(); len(eps) > 0 {
		l, err := dialEtcd(ctx, eps, cfg, obs, log)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { _ = l.Close() })
		lockers[stock.Etcd] = l
	}
	if len(cfg.RedlockURLs) > 0 {
		var servers []redis.UniversalClient
		for _, u := range cfg.RedlockURLs { // validated by loadConfig
			opts, _ := redis.ParseURL(u)
			opts.ContextTimeoutEnabled = true // package redlock's per-server timeouts
			c := redis.NewClient(opts)
			closers = append(closers, func() { _ = c.Close() })
			servers = append(servers, c)
		}
		lockers[stock.Redlock] = redlock.New(servers, redlock.Options{Options: base, FenceFloor: store.FenceFloor(redlock.Backend)})
	}
	if servers := cfg.zooKeeperServers(); servers != nil {
		zctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		zl, err := zklock.New(zctx, servers, zklock.Options{Options: base})
		cancel()
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("INVENTORY_ZOOKEEPER_SERVERS: %w", err)
		}
		closers = append(closers, func() { _ = zl.Close() })
		lockers[stock.ZooKeeper] = zl
	}
	return lockers, closeAll, nil
}
