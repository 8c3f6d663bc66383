package faults

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"inventory/internal/localstack"
)

// RedisRestart is redis-restart: Redis is killed (SIGKILL) while a sale is
// inside its critical section and started again empty (no persistence):
// every lock, fencing counter and stock counter is gone. The first of the
// Redlock servers, when the fleet has them, goes the same way at the same
// moment: one of three servers losing its data, which is what Redlock is
// meant to survive, and with a lock held on it, what it does not.
type RedisRestart struct {
	killed []*localstack.Redis
}

// Name implements Fault.
func (*RedisRestart) Name() string { return "redis-restart" }

// Scope implements Scoped.
func (*RedisRestart) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *RedisRestart) Inject(ctx context.Context, t Target) error {
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
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
	return errors.Join(errs...)
}
