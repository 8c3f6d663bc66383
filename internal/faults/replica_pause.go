package faults

import (
	"context"
	"fmt"
	"syscall"

	"inventory/internal/fleet"
	"inventory/internal/localstack"
)

// ReplicaPause is replica-pause: the first replica's process is stopped
// (SIGSTOP, the server itself, not a wrapper) while a sale is inside its
// critical section, for twice the lock TTL, so every lock it holds expires
// (its watchdog is stopped with it) and the other replica goes on selling;
// then it is continued (SIGCONT) and its stale sales resume.
type ReplicaPause struct {
	paused *fleet.Replica
}

// Name implements Fault.
func (*ReplicaPause) Name() string { return "replica-pause" }

// Scope implements Scoped.
func (*ReplicaPause) Scope() Scope { return ScopeFleet }

// Inject implements Fault.
func (f *ReplicaPause) Inject(ctx context.Context, t Target) error {
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	r := t.Fleet.Replicas[0]
	f.paused = r // Heal continues it, even after a failed pause
	// The pause lasts from when it took effect, not from when it was sent.
	if err := localstack.Pause(r.Pid()); err != nil {
		return fmt.Errorf("pause %s: %w", r.Instance, err)
	}
	return sleep(ctx, 2*t.LockTTL)
}

// Heal implements Fault.
func (f *ReplicaPause) Heal(context.Context) error {
	if f.paused == nil {
		return nil
	}
	r := f.paused
	f.paused = nil
	if err := syscall.Kill(r.Pid(), syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", r.Instance, err)
	}
	return nil
}
