package faults

import (
	"context"
	"time"
)

// PGRestart is pg-restart: Postgres shuts down immediately (every session
// cut, open sale transactions rolled back) while a sale transaction is
// open (when the buyers hold orders, Target.Orders, once held orders are
// past their deadline too: mid-sweep), and starts again with crash
// recovery. Inject returns once it
// answers queries again; Heal waits until every replica is ready.
type PGRestart struct {
	target *Target
	began  time.Time     // the restart's start
	outage time.Duration // from began until every replica was ready again
}

// Outage implements Outage: from the shutdown until every replica was
// ready again.
func (f *PGRestart) Outage() time.Duration { return f.outage }

// Name implements Fault.
func (*PGRestart) Name() string { return "pg-restart" }

// Scope implements Scoped.
func (*PGRestart) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *PGRestart) Inject(ctx context.Context, t Target) error {
	if err := dueOrders(ctx, t); err != nil {
		return err
	}
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	f.target, f.began, f.outage = &t, time.Now(), 0
	return t.Fleet.Postgres.RestartImmediate(ctx)
}

// Heal implements Fault.
func (f *PGRestart) Heal(ctx context.Context) error {
	if f.target == nil {
		return nil
	}
	t := *f.target
	f.target = nil
	err := replicasReady(ctx, t)
	f.outage = time.Since(f.began)
	return err
}
