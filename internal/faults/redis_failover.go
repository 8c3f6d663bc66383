package faults

import (
	"context"
	"fmt"
	"syscall"

	"github.com/redis/go-redis/v9"

	"inventory/internal/localstack"
)

// RedisFailover is redis-failover: Redis has a replica (see
// fleet.Options.RedisReplica) whose replication is held back (CLIENT PAUSE
// WRITE), so what the primary takes while a sale is in flight (a lock key,
// a fencing counter, a reservation) never reaches it; the primary is killed
// and the replica promoted, and every replica's link to Redis moves to it,
// as a virtual address follows a promotion. A lock taken on the old primary
// is gone on the new one: a second holder can take it, and only Postgres's
// fence and guard stand between them and an oversell. Heal starts the old
// primary again, empty, as the new primary's replica.
type RedisFailover struct {
	killed  *localstack.Redis
	primary string
}

// Name implements Fault.
func (*RedisFailover) Name() string { return "redis-failover" }

// Scope implements Scoped.
func (*RedisFailover) Scope() Scope { return ScopeFleet }

// holdBackMs is how long the replica's replication stays paused: longer
// than any run's fault window, and CLIENT UNPAUSE ends it sooner.
const holdBackMs = 30_000

// Inject implements Fault.
func (f *RedisFailover) Inject(ctx context.Context, t Target) error {
	fl := t.Fleet
	if fl.RedisReplica == nil {
		return fmt.Errorf("the fleet's Redis has no replica to fail over to: start it with RedisReplica")
	}
	for _, r := range fl.Replicas {
		if r.RedisLink == nil {
			return fmt.Errorf("%s has no link to Redis to move: start the fleet with NetLinks", r.Instance)
		}
	}
	primary, replica := fl.Redis, fl.RedisReplica
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	defer rc.Close()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", holdBackMs, "WRITE").Err(); err != nil {
		return fmt.Errorf("hold the replica's replication back: %w", err)
	}
	if err := saleInFlight(ctx, t); err != nil {
		_ = rc.Do(ctx, "CLIENT", "UNPAUSE").Err()
		return err
	}
	if err := syscall.Kill(primary.Pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the Redis primary: %w", err)
	}
	f.killed = primary
	if err := rc.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		return fmt.Errorf("let the replica go: %w", err)
	}
	if err := replica.ReplicaOf(ctx, ""); err != nil {
		return fmt.Errorf("promote the replica: %w", err)
	}
	for _, r := range fl.Replicas {
		if err := r.RedisLink.Redirect(replica.Addr); err != nil {
			return err
		}
	}
	fl.SwapRedis()
	f.primary = replica.Addr
	return nil
}

// Heal implements Fault.
func (f *RedisFailover) Heal(ctx context.Context) error {
	if f.killed == nil {
		return nil
	}
	old := f.killed
	f.killed = nil
	if err := old.Restart(ctx); err != nil {
		return err
	}
	if err := old.ReplicaOf(ctx, f.primary); err != nil {
		return err
	}
	return nil
}
