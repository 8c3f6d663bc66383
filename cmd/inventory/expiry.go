package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"inventory/internal/inventory"
	"inventory/internal/jobs"
	"inventory/internal/lock"
	"inventory/internal/metrics"
	"inventory/internal/postgres"
	"inventory/internal/redis"
	"inventory/internal/stock"
)

// expiryLock is the lock strategy whose locker runs the expiry job: the
// re-entrant Redis lock, renewed by its watchdog while the runner lives
// (a lock that is not renewed would change runners every TTL), fenced by
// redislock's counter, which restarts above the job's last token in
// Postgres when Redis loses it (postgres.Store.FenceFloor). Redis is
// always configured, so it always has a locker.
const expiryLock = inventory.Reentrant

// newExpiryJob is the runner of the expiry job: every replica runs one,
// they contend for lock:job:{order-expiry}, and the holder sweeps the held
// orders past their deadline every cfg.OrderSweepInterval (stock.Orders.Sweep),
// each sweep's writes fenced by its lease's token.
func newExpiryJob(cfg config, lockers map[string]lock.Locker, orders stock.Orders, store *postgres.Store,
	m *metrics.Metrics, reg prometheus.Registerer, log *slog.Logger) (*jobs.Runner, error) {
	l := lockers[expiryLock]
	if l == nil {
		return nil, fmt.Errorf("the expiry job: strategy %q has no lock in this replica", expiryLock)
	}
	sweep := func(ctx context.Context, fence lock.Fence) error {
		n, err := orders.Sweep(ctx, fence)
		held, overdue, herr := store.HeldOrders(ctx)
		if herr == nil {
			m.OrdersSwept(n, held, overdue)
		}
		return errors.Join(err, herr)
	}
	return jobs.New(l, redis.JobLockKey(postgres.ExpiryJob), sweep, jobs.Options{
		Name: postgres.ExpiryJob, Interval: cfg.OrderSweepInterval, Logger: log, Metrics: jobs.NewMetrics(reg),
	}), nil
}
