package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"inventory/internal/fleet"
	"inventory/internal/localstack"
)

// ClockJump is clock-jump: one lock server's wall clock jumps forward
// while buyers are inside their critical sections, the seeds' objection to
// Redlock (a Redis node whose clock jumps expires its lock early). Redis
// expires keys by its wall clock, so every lock key, lease and reservation
// it holds that the jump carries past its TTL is gone at once, while its
// holder still believes it holds it. The fleet's Redis (the lock server of
// setnx, redis, reentrant, fair and handoff, and of lua's reservation
// leases) and the first of the three Redlock servers jump together, by By,
// then again every lock TTL while the struck runs' buyers are still
// selling (at most clockJumps times), so that the holders of every stage
// of a run are struck, its last units included. Heal puts both clocks
// back, a jump backwards that only lengthens the TTLs set meanwhile.
//
// The servers run under libfaketime (fleet.Options.FakeClock, see Needs);
// the service's own clock is untouched (Go reads the clock through the
// vDSO, which libfaketime cannot reach, and a replica's lease timers are
// monotonic anyway).
type ClockJump struct {
	// By is how far each jump moves the clock; 0: three lock TTLs, at
	// least 3s: past any lock's TTL and lua's reservation lease (2s), and
	// clockJumps of them short of lua's counter TTL (a minute), so it
	// breaks leases, not the counters.
	By time.Duration

	jumped []*localstack.Redis
}

// clockJumps bounds how many times the clock jumps forward in one
// injection.
const clockJumps = 10

// Name implements Fault.
func (*ClockJump) Name() string { return "clock-jump" }

// Scope implements Scoped: the jump strikes every lock on the server.
func (*ClockJump) Scope() Scope { return ScopeFleet }

// Needs implements FleetNeeds: Redis and the first Redlock server under
// libfaketime, and critical sections of at least clockJumpWork. A jump
// breaks a lock at once, but it is only seen when another buyer takes the
// lock before its holder is done: waiters retry on their own timers (an
// expiry sends no release notice), so a holder whose section lasts the
// matrix's 2ms is nearly always gone before anyone looks, and the broken
// lock goes unseen. The fleet is clock-jump's own, so the others keep
// theirs.
func (*ClockJump) Needs(opts *fleet.Options) {
	opts.FakeClock = true
	if opts.Env == nil {
		opts.Env = map[string]string{}
	}
	if d, err := time.ParseDuration(opts.Env["INVENTORY_WORK_DELAY"]); err != nil || d < clockJumpWork {
		opts.Env["INVENTORY_WORK_DELAY"] = clockJumpWork.String()
	}
}

// clockJumpWork is the shortest critical section (INVENTORY_WORK_DELAY)
// clock-jump runs with.
const clockJumpWork = 25 * time.Millisecond

// AppliesTo implements Applicable: only strategies that keep a lock,
// lease or reservation with a TTL on one of the jumping Redis servers
// (a jump of Postgres', etcd's or ZooKeeper's clock would be another fault).
func (*ClockJump) AppliesTo(t Target) error {
	return appliesTo(t.Strategy, clockJumpApplies, "its sale keeps no lock or lease with a TTL in Redis")
}

// clockJumpApplies is the strategies whose lock or lease lives in the
// jumping Redis servers.
var clockJumpApplies = []string{"setnx", "redis", "reentrant", "fair", "redlock", "lua", "handoff"}

// Inject implements Fault: it waits for a sale inside its critical
// section, then jumps the clocks, and again a lock TTL later while the
// buyers are still selling, and returns a lock TTL after the last jump,
// time for the last holders struck to notice.
func (f *ClockJump) Inject(ctx context.Context, t Target) error {
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	servers, err := clockServers(t.Fleet)
	if err != nil {
		return err
	}
	ttl := t.LockTTL
	if ttl <= 0 {
		ttl = time.Second
	}
	by := f.By
	if by <= 0 {
		by = max(3*ttl, 3*time.Second)
	}
	for i := 1; i <= clockJumps; i++ {
		if err := f.jump(servers, time.Duration(i)*by); err != nil {
			return err
		}
		if err := hold(ctx, ttl); err != nil {
			return err
		}
		select {
		case <-t.Selling:
			return nil
		default:
		}
	}
	return nil
}

// clockServers is the servers clock-jump moves: the fleet's Redis and the
// first Redlock server, when the fleet has them.
func clockServers(fl *fleet.Fleet) ([]*localstack.Redis, error) {
	servers := []*localstack.Redis{fl.Redis}
	if len(fl.RedlockServers) > 0 {
		servers = append(servers, fl.RedlockServers[0])
	}
	for _, r := range servers {
		if !r.FakeClock() {
			return nil, fmt.Errorf("clock-jump: redis-server on %s runs on the real clock: start the fleet with FakeClock", r.Addr)
		}
	}
	return servers, nil
}

// jump sets every server's clock offset to by, remembering them for Heal.
func (f *ClockJump) jump(servers []*localstack.Redis, by time.Duration) error {
	for _, r := range servers {
		if err := r.SetClock(by); err != nil {
			return fmt.Errorf("clock-jump: %w", err)
		}
		if !slices.Contains(f.jumped, r) {
			f.jumped = append(f.jumped, r)
		}
	}
	return nil
}

// Heal implements Fault: every jumped clock is true again.
func (f *ClockJump) Heal(context.Context) error {
	var errs []error
	for _, r := range f.jumped {
		errs = append(errs, r.SetClock(0))
	}
	f.jumped = nil
	return errors.Join(errs...)
}
