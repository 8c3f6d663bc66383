package faults

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"inventory/internal/localstack"
)

// RedisRestart is redis-restart: Redis is killed (SIGKILL) while a sale is
// inside its critical section (and, when the buyers hold orders, while
// holds are outstanding) and started again empty (no persistence): every
// lock, fencing counter and stock counter is gone, the expiry job's lock
// and counter too (its next runner's tokens must still rise: the counter
// restarts above the job's floor in Postgres). The first of the
// Redlock servers, when the fleet has them, goes the same way at the same
// moment: one of three servers losing its data, which is what Redlock is
// meant to survive, and with a lock held on it, what it does not.
type RedisRestart struct {
	killed []*localstack.Redis
	began  time.Time     // the kill
	outage time.Duration // from the kill until every server was back
}

// Outage implements Outage: from the kill until every server killed was
// serving again (empty).
func (f *RedisRestart) Outage() time.Duration { return f.outage }

// Name implements Fault.
func (*RedisRestart) Name() string { return "redis-restart" }

// Scope implements Scoped.
func (*RedisRestart) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *RedisRestart) Inject(ctx context.Context, t Target) error {
	if err := holdsOutstanding(ctx, t); err != nil {
		return err
	}
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	f.began, f.outage = time.Now(), 0
	servers := []*localstack.Redis{t.Fleet.Redis}
	if len(t.Fleet.RedlockServers) > 0 {
		servers = append(servers, t.Fleet.RedlockServers[0])
	}
	for _, r := range servers {
		if err := syscall.Kill(r.Pid(), syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill redis-server on %s: %w", r.Addr, err)
		}
		f.killed = append(f.killed, r)
	}
	return nil
}

// Heal implements Fault.
func (f *RedisRestart) Heal(ctx context.Context) error {
	var errs []error
	for _, r := range f.killed {
		errs = append(errs, r.Restart(ctx))
	}
	f.killed = nil
	f.outage = time.Since(f.began)
	return errors.Join(errs...)
}
