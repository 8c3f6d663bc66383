package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inventory/internal/fleet"
)

// netLatency is the delay net-latency adds to each direction of the
// faulted replica's links, ± netJitter: a round trip costs 2× as much, so
// a lock section of a few round trips outlives a short lock TTL.
const netLatency, netJitter = 100 * time.Millisecond, 50 * time.Millisecond

// NetLatency is net-latency: while a sale is in flight, the first
// replica's links to Postgres and Redis (proxies, see fleet.Options.NetLinks)
// get slow, for twice the lock TTL; then they are whole again. Its holders
// outlive their leases mid-section, as a slow network makes them do.
type NetLatency struct {
	slowed *fleet.Replica
}

// Name implements Fault.
func (*NetLatency) Name() string { return "net-latency" }

// Scope implements Scoped.
func (*NetLatency) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *NetLatency) Inject(ctx context.Context, t Target) error {
	r, err := linkedReplica(t)
	if err != nil {
		return err
	}
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	f.slowed = r
	if err := errors.Join(r.PostgresLink.AddLatency(netLatency, netJitter), r.RedisLink.AddLatency(netLatency, netJitter)); err != nil {
		return err
	}
	return sleep(ctx, 2*t.LockTTL)
}

// Heal implements Fault.
func (f *NetLatency) Heal(ctx context.Context) error {
	if f.slowed == nil {
		return nil
	}
	r := f.slowed
	f.slowed = nil
	r.PostgresLink.Heal(ctx)
	r.RedisLink.Heal(ctx)
	return nil
}

// linkedReplica is the replica the network faults act on: the first, which
// must have been started with its own links (fleet.Options.NetLinks).
func linkedReplica(t Target) (*fleet.Replica, error) {
	r := t.Fleet.Replicas[0]
	if r.PostgresLink == nil || r.RedisLink == nil {
		return nil, fmt.Errorf("%s has no network links to fault: start the fleet with NetLinks", r.Instance)
	}
	return r, nil
}
