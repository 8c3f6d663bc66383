package faults

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/fleet"
	"inventory/internal/localstack"
)

// RedisFailover is redis-failover: Redis has a replica and a Sentinel, and
// the service replicas reach Redis through the Sentinel (see Needs). The
// replica's replication is held back (CLIENT PAUSE WRITE), so what the
// primary takes while a sale is in flight (a lock key, a fencing counter, a
// reservation) never reaches it; the primary is killed, and the Sentinel
// promotes the replica. The service's failover client follows the new
// primary by itself. A lock taken on the old primary is gone on the new
// one: a second holder can take it, and only Postgres's fence and guard
// stand between them and an oversell. Heal starts the old primary again,
// empty, as the new primary's replica.
type RedisFailover struct {
	fleet    *fleet.Fleet
	killed   *localstack.Redis
	promoted *localstack.Redis
}

// Name implements Fault.
func (*RedisFailover) Name() string { return "redis-failover" }

// Scope implements Scoped.
func (*RedisFailover) Scope() Scope { return ScopeFleet }

// Needs implements FleetNeeds: a Redis replica and a Sentinel that the
// service replicas reach Redis through.
func (*RedisFailover) Needs(opts *fleet.Options) { opts.RedisSentinel = true }

const (
	// replicaPauseMs is how long CLIENT PAUSE holds the replica's
	// replication back: longer than any run's fault window, and CLIENT
	// UNPAUSE ends it sooner.
	replicaPauseMs = 30_000
	// failoverWait bounds each wait for Redis or the Sentinel to reach a
	// state; the Sentinel declares a silent primary down after a second.
	failoverWait = 30 * time.Second
)

// Inject implements Fault. It returns once the Sentinel names the replica
// the new primary.
func (f *RedisFailover) Inject(ctx context.Context, t Target) error {
	fl := t.Fleet
	if fl.Sentinel == nil || fl.RedisReplica == nil {
		return fmt.Errorf("the fleet's Redis has no Sentinel and replica to fail over to: start it with RedisSentinel")
	}
	// Whoever the Sentinel names is the primary to kill (a failover of its
	// own, if one happened, included).
	if master, err := fl.Sentinel.MasterAddr(ctx); err == nil && master == fl.RedisReplica.Addr {
		fl.SwapRedis()
	}
	primary, replica, sentinel := fl.Redis, fl.RedisReplica, fl.Sentinel
	// The last heal's replica must be one the Sentinel would promote.
	if err := sentinel.WaitReplica(ctx, replica.Addr, failoverWait); err != nil {
		return fmt.Errorf("before the failover: %w", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	defer rc.Close()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", replicaPauseMs, "WRITE").Err(); err != nil {
		return fmt.Errorf("pause the replica's replication: %w", err)
	}
	if err := saleInFlight(ctx, t); err != nil {
		_ = rc.Do(ctx, "CLIENT", "UNPAUSE").Err()
		return err
	}
	if err := syscall.Kill(primary.Pid(), syscall.SIGKILL); err != nil {
		_ = rc.Do(ctx, "CLIENT", "UNPAUSE").Err()
		return fmt.Errorf("kill the Redis primary: %w", err)
	}
	f.fleet, f.killed, f.promoted = fl, primary, replica
	// Once the replica has seen its link to the primary go, it has dropped
	// the writes it was holding back; let go of it only then, or it would
	// apply them.
	if err := awaitLinkDown(ctx, rc); err != nil {
		_ = rc.Do(ctx, "CLIENT", "UNPAUSE").Err()
		return err
	}
	if err := rc.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		return fmt.Errorf("let the replica go: %w", err)
	}
	if err := sentinel.WaitMaster(ctx, replica.Addr, failoverWait); err != nil {
		return fmt.Errorf("the Sentinel did not promote the replica: %w", err)
	}
	fl.SwapRedis()
	return nil
}

// awaitLinkDown waits until the Redis replica behind rc reports its link
// to the primary down (INFO replication).
func awaitLinkDown(ctx context.Context, rc *redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:down") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the replica to lose its primary: %w (INFO replication: %q, %v)", ctx.Err(), info, err)
		case <-tick.C:
		}
	}
}

// Heal implements Fault: it returns once the old primary, restarted empty,
// replicates the new one, the Sentinel could promote it in the next
// failover, and every replica is ready. The old primary is made the new
// one's replica here (REPLICAOF) rather than left to the Sentinel, which
// converts a returning old primary only once it has reported itself a
// primary for 8 s and its INFO has been polled again (every 10 s): about
// 10 s measured here, against about half a second this way.
func (f *RedisFailover) Heal(ctx context.Context) error {
	if f.killed == nil {
		return nil
	}
	old, primary, fl := f.killed, f.promoted, f.fleet
	f.killed = nil
	if err := old.Restart(ctx); err != nil {
		return err
	}
	if err := localstack.QuickSyncs(ctx, old); err != nil { // it is the next failover's promoted primary
		return err
	}
	if err := old.ReplicaOf(ctx, primary.Addr); err != nil {
		return err
	}
	if err := localstack.WaitReplicating(ctx, old.Addr, primary.Addr, failoverWait); err != nil {
		return fmt.Errorf("after the failover: %w", err)
	}
	// The next failover needs the Sentinel to see a replica it can promote.
	if err := fl.Sentinel.WaitReplica(ctx, old.Addr, failoverWait); err != nil {
		return fmt.Errorf("after the failover: %w", err)
	}
	return replicasReady(ctx, Target{Fleet: fl})
}
