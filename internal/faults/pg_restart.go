package faults

import "context"

// PGRestart is pg-restart: Postgres shuts down immediately (every session
// cut, open sale transactions rolled back) while a sale transaction is
// open, and starts again with crash recovery. Inject returns once it
// answers queries again; Heal waits until every replica is ready.
type PGRestart struct {
	target *Target
}

// Name implements Fault.
func (*PGRestart) Name() string { return "pg-restart" }

// Scope implements Scoped.
func (*PGRestart) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *PGRestart) Inject(ctx context.Context, t Target) error {
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	f.target = &t
	return t.Fleet.Postgres.RestartImmediate(ctx)
}

// Heal implements Fault.
func (f *PGRestart) Heal(ctx context.Context) error {
	if f.target == nil {
		return nil
	}
	t := *f.target
	f.target = nil
	return replicasReady(ctx, t)
}
