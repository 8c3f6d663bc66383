package faults

import (
	"context"
	"time"

	"inventory/internal/fleet"
)

// ReplicaKill is replica-kill: the first replica is killed (SIGKILL: no
// draining, its locks and transactions abandoned) while a sale is inside
// its critical section (when the buyers hold orders, Target.Orders: while
// an order's step, a payment say, is inside its transaction), then started
// again on the same address.
type ReplicaKill struct {
	killed *fleet.Replica
}

// Name implements Fault.
func (*ReplicaKill) Name() string { return "replica-kill" }

// Scope implements Scoped.
func (*ReplicaKill) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *ReplicaKill) Inject(ctx context.Context, t Target) error {
	inFlight := saleInFlight
	if t.Orders {
		inFlight = stepInFlight
	}
	if err := inFlight(ctx, t); err != nil {
		return err
	}
	r := t.Fleet.Replicas[0]
	if err := r.Kill(); err != nil {
		return err
	}
	f.killed = r
	return nil
}

// Heal implements Fault.
func (f *ReplicaKill) Heal(ctx context.Context) error {
	if f.killed == nil {
		return nil
	}
	r := f.killed
	f.killed = nil
	return r.Restart(ctx, time.Minute)
}
