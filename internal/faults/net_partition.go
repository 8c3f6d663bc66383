package faults

import (
	"context"
	"errors"
	"time"

	"inventory/internal/fleet"
)

// NetPartition is net-partition: while a sale is in flight, the first
// replica's links to Postgres and Redis (proxies, see
// fleet.Options.NetLinks) are cut, every byte dropped both ways, for twice
// the lock TTL: its locks expire and the other replica sells on. Then the
// links are restored; the connections that were cut are closed, and the
// partitioned replica reconnects with whatever it was doing rolled back
// or refused.
type NetPartition struct {
	cut *fleet.Replica
}

// Name implements Fault.
func (*NetPartition) Name() string { return "net-partition" }

// Scope implements Scoped.
func (*NetPartition) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *NetPartition) Inject(ctx context.Context, t Target) error {
	r, err := linkedReplica(t)
	if err != nil {
		return err
	}
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	f.cut = r
	if err := errors.Join(r.PostgresLink.Cut(), r.RedisLink.Cut()); err != nil {
		return err
	}
	return sleep(ctx, 2*t.LockTTL)
}

// Heal implements Fault.
func (f *NetPartition) Heal(ctx context.Context) error {
	if f.cut == nil {
		return nil
	}
	r := f.cut
	f.cut = nil
	r.PostgresLink.Heal(ctx)
	r.RedisLink.Heal(ctx)
	return r.WaitReady(ctx, time.Minute)
}
