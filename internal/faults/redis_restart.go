package faults

import (
	"context"
	"fmt"
	"syscall"

	"inventory/internal/localstack"
)

// RedisRestart is redis-restart: Redis is killed (SIGKILL) while a sale is
// inside its critical section and started again empty (no persistence):
// every lock, fencing counter and stock counter is gone.
type RedisRestart struct {
	killed *localstack.Redis
}

// Name implements Fault.
func (*RedisRestart) Name() string { return "redis-restart" }

// Inject implements Fault.
func (f *RedisRestart) Inject(ctx context.Context, t Target) error {
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	if err := syscall.Kill(t.Fleet.Redis.Pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill redis-server: %w", err)
	}
	f.killed = t.Fleet.Redis
	return nil
}

// Heal implements Fault.
func (f *RedisRestart) Heal(ctx context.Context) error {
	if f.killed == nil {
		return nil
	}
	r := f.killed
	f.killed = nil
	return r.Restart(ctx)
}
