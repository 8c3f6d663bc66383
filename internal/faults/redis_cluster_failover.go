package faults

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/fleet"
	"inventory/internal/localstack"
)

// RedisClusterFailover is redis-cluster-failover: the service replicas use
// a Redis Cluster (see Needs), and the master that owns the run's
// product's slot (every key of a product carries its {id} tag) dies while
// a sale is in flight; side by side, every run's product is placed on one
// master (Colocate), which dies once for all of them. Its replica's
// replication is held back first (CLIENT PAUSE WRITE), so what the master
// takes meanwhile (a lock, a fencing counter, a reservation) never reaches
// it; the master is killed, the replica let go once it has seen its link
// drop, and it wins the cluster's election (after the node timeout); the
// replicas' cluster clients follow by themselves. A lock taken on the old master is gone on
// the new one, and only Postgres's fence and guard stand between a second
// holder and an oversell. Heal starts the old master again; it rejoins
// the cluster as its old replica's replica.
type RedisClusterFailover struct {
	fleet  *fleet.Fleet
	killed *localstack.Redis
}

// Name implements Fault.
func (*RedisClusterFailover) Name() string { return "redis-cluster-failover" }

// Needs implements FleetNeeds: the replicas on a Redis Cluster.
func (*RedisClusterFailover) Needs(opts *fleet.Options) { opts.RedisCluster = true }

// Scope implements Scoped: the runs of a round buy products on one master
// (Colocate), so that one kill strikes them all.
func (*RedisClusterFailover) Scope() Scope { return ScopeFleet }

// struckKey is the key whose slot's master Inject kills when its Target
// names no product (side by side); Colocate places the runs' products on
// the same master.
const struckKey = "stock:{redis-cluster-failover}"

// productKey is a key of product's, in its {id} slot.
func productKey(product string) string { return "stock:{" + product + "}" }

// colocateTries bounds Colocate's search: each suffix lands on the struck
// master with a chance of one in the cluster's masters (three here).
const colocateTries = 200

// Colocate implements Colocator: product, or product with the first
// suffix ("-2", "-3", …) that puts its slot on the master owning struckKey's,
// the master the round's injection kills.
func (*RedisClusterFailover) Colocate(ctx context.Context, fl *fleet.Fleet, product string) (string, error) {
	cluster := fl.RedisCluster
	if cluster == nil {
		return "", errNoCluster
	}
	struck, err := cluster.MasterOf(ctx, struckKey)
	if err != nil {
		return "", err
	}
	for i := 1; i <= colocateTries; i++ {
		id := product
		if i > 1 {
			id = fmt.Sprintf("%s-%d", product, i)
		}
		m, err := cluster.MasterOf(ctx, productKey(id))
		if err != nil {
			return "", err
		}
		if m == struck {
			return id, nil
		}
	}
	return "", fmt.Errorf("no product id %q or %q-N (N ≤ %d) on %s, the master of %s's slot", product, product, colocateTries, struck.Addr, struckKey)
}

var errNoCluster = errors.New("the fleet has no Redis Cluster: start it with RedisCluster")

// AppliesTo implements Applicable: the strategies that keep state in the
// fleet's Redis (Strategy.UsesRedis), which is the cluster here; redlock
// keeps servers of its own.
func (*RedisClusterFailover) AppliesTo(t Target) error {
	return appliesTo(t, func(s Strategy) bool { return s.UsesRedis }, "keeps nothing in the Redis Cluster")
}

// Inject implements Fault: it kills the master of t.Product's slot, or of
// struckKey's when t names no product (side by side). It returns once a
// node other than the killed one is master of that slot.
func (f *RedisClusterFailover) Inject(ctx context.Context, t Target) error {
	cluster := t.Fleet.RedisCluster
	if cluster == nil {
		return errNoCluster
	}
	key := struckKey
	if t.Product != "" {
		key = productKey(t.Product)
	}
	master, err := cluster.MasterOf(ctx, key)
	if err != nil {
		return err
	}
	replica, err := cluster.ReplicaOf(ctx, master)
	if err != nil {
		return err
	}
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	defer rc.Close()
	unpause := func() { _ = rc.Do(context.WithoutCancel(ctx), "CLIENT", "UNPAUSE").Err() }
	if err := rc.Do(ctx, "CLIENT", "PAUSE", replicaPauseMs, "WRITE").Err(); err != nil {
		return fmt.Errorf("pause the replica's replication: %w", err)
	}
	if err := saleInFlight(ctx, t); err != nil {
		unpause()
		return err
	}
	if err := syscall.Kill(master.Pid(), syscall.SIGKILL); err != nil {
		unpause()
		return fmt.Errorf("kill the master of %s's slot: %w", key, err)
	}
	f.fleet, f.killed = t.Fleet, master
	// Let go of the replica only once it has dropped the held-back writes
	// with its link (see RedisFailover).
	if err := awaitLinkDown(ctx, rc); err != nil {
		unpause()
		return err
	}
	unpause()
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	for {
		now, err := cluster.MasterOf(ctx, key)
		if err == nil && now != master {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the replica %s did not take over %s's slot from %s: %w (last: %v)", replica.Addr, key, master.Addr, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Heal implements Fault: it returns once the old master, restarted, has
// rejoined as a replica in sync, the cluster is healthy, and every service
// replica is ready.
func (f *RedisClusterFailover) Heal(ctx context.Context) error {
	if f.killed == nil {
		return nil
	}
	old, fl := f.killed, f.fleet
	f.killed = nil
	if err := old.Restart(ctx); err != nil {
		return err
	}
	if err := fl.RedisCluster.WaitHealthy(ctx, failoverWait); err != nil {
		return fmt.Errorf("after the failover: %w", err)
	}
	return replicasReady(ctx, Target{Fleet: fl})
}
