package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"inventory/internal/client"
	"inventory/internal/fleet"
)

// Fault is one injectable fault. Inject returns once the fault has struck
// (a fault with a duration, such as a pause, holds it before returning);
// Heal undoes it and returns once the fleet can serve again. Heal is called
// after every Inject that returned nil, on the same value: a Fault keeps
// what it needs to heal between the two calls, so one value serves one run
// at a time.
type Fault interface {
	// Name is the fault's name in the design's vocabulary, e.g. "replica-kill".
	Name() string
	Inject(ctx context.Context, t Target) error
	Heal(ctx context.Context) error
}

// Scope is how far a fault reaches, which decides whether the matrix may
// run the cells of several strategies side by side under it.
type Scope int

const (
	// ScopeRun: the fault acts on something the whole run shares (the
	// fleet default, the next COMMIT anywhere): one cell at a time.
	ScopeRun Scope = iota
	// ScopeProduct: the fault acts on the run's product alone: cells run
	// side by side, each with a Fault value of its own.
	ScopeProduct
	// ScopeFleet: the fault strikes the whole fleet alike (a replica,
	// Redis, Postgres, the network): one injection serves every cell run
	// side by side, each buying its own product with its own strategy.
	ScopeFleet
)

// Scoped is implemented by faults whose scope is not ScopeRun.
type Scoped interface{ Scope() Scope }

// ScopeOf returns f's Scope.
func ScopeOf(f Fault) Scope {
	if s, ok := f.(Scoped); ok {
		return s.Scope()
	}
	return ScopeRun
}

// Colocator is implemented by ScopeFleet faults that reach only the
// products kept on one part of the fleet (redis-cluster-failover: one
// Redis Cluster master's slots). Colocate returns a product id, product
// itself or product with a suffix, kept there: whoever runs the fault side
// by side names every run's product with it, so that one injection strikes
// them all.
type Colocator interface {
	Colocate(ctx context.Context, fl *fleet.Fleet, product string) (string, error)
}

// DefaultChanger is implemented by faults that change the fleet default
// themselves (strategy-switch): a run they strike may sell with more than
// the default it started with.
type DefaultChanger interface{ ChangesDefault() bool }

// ChangesDefault reports whether f changes the fleet default itself.
func ChangesDefault(f Fault) bool {
	c, ok := f.(DefaultChanger)
	return ok && c.ChangesDefault()
}

// FleetNeeds is implemented by faults that need the fleet started in a
// way of their own (a Redis watched by a Sentinel, say): Needs sets in
// opts what the fault needs. Faults whose needs give the same options can
// share a fleet; the others need one each.
type FleetNeeds interface{ Needs(opts *fleet.Options) }

// FleetOptions returns base with what f needs (see FleetNeeds). base is
// left as it was.
func FleetOptions(f Fault, base fleet.Options) fleet.Options {
	opts := base
	opts.Env = maps.Clone(base.Env)
	if n, ok := f.(FleetNeeds); ok {
		n.Needs(&opts)
	}
	return opts
}

// Applicable is implemented by faults that act on some strategies only:
// AppliesTo returns nil, or why the fault has nothing to act on with
// t.Strategy (wrapping ErrNotApplicable). It is decided from what the
// strategy is (its properties in t.Strategies, as GET /strategies tells
// them: its lock backend, whether it uses Redis, …; never from a list of
// names, so that a strategy added later is struck by every fault its
// properties call for), before the run, never from what the fault found
// when it struck: a fault that applies but found nothing to strike is a
// miss (ErrMissed, ErrNotStruck), and its run is tried again.
type Applicable interface{ AppliesTo(t Target) error }

// AppliesTo returns nil if f applies to t.Strategy, else why not.
func AppliesTo(f Fault, t Target) error {
	if a, ok := f.(Applicable); ok {
		return a.AppliesTo(t)
	}
	return nil
}

// appliesTo is AppliesTo for a fault that applies to the strategies whose
// properties (t's entry of t.Strategies) pass applies; one that does not
// pass does not apply, for why.
func appliesTo(t Target, applies func(Strategy) bool, why string) error {
	s, ok := t.strategy()
	if !ok {
		return fmt.Errorf("%s: not among the strategies offered, whose properties say what a fault acts on: %w", t.Strategy, ErrNotApplicable)
	}
	if applies(s) {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", t.Strategy, why, ErrNotApplicable)
}

// LockBreaker is implemented by faults whose strike is meant to end the
// strategies' locks or leases under their holders (clock-jump), as the
// fault declares and the matrix then demands: every cell of such a fault
// must show a lock broken in at least one run (a lease ended early, a
// breach the fence or guard refused, two holders at once), else it did not
// strike. LeasesEnded is the fault's own record of its last injection: by
// product, the leases it saw itself end under their holders.
type LockBreaker interface{ LeasesEnded() map[string]int }

// BreaksLocks reports whether f declares that its strike breaks locks
// (LockBreaker).
func BreaksLocks(f Fault) bool {
	_, ok := f.(LockBreaker)
	return ok
}

// LeasesEnded is f's record of the leases its last injection ended, by
// product; nil for a fault that keeps none.
func LeasesEnded(f Fault) map[string]int {
	if b, ok := f.(LockBreaker); ok {
		return b.LeasesEnded()
	}
	return nil
}

// Outage is implemented by faults that take away from every replica, for
// a while, what the expiry job needs to expire anything at all: Postgres
// (pg-restart, pg-failover), the Redis that keeps its lock and counter
// (redis-restart), or the rows a paused replica's open transactions hold
// until Postgres ends them (runner-pause: a product's stock row, which
// every return needs). Outage is how long the last injection kept it
// away, measured from the strike until it served again. An order due
// meanwhile cannot expire before then, so whoever holds expiries to the
// job's bound (the matrix's orders mode) holds them to the bound plus the
// outage. A fault that kills one replica (replica-kill) is no outage:
// another replica takes the job over within the bound; runner-pause holds
// that takeover to its bound itself (its Heal fails otherwise), so the
// rows' outage forgives no job nobody took over.
type Outage interface{ Outage() time.Duration }

// OutageOf is f's last outage; 0 for a fault that is no Outage.
func OutageOf(f Fault) time.Duration {
	if o, ok := f.(Outage); ok {
		return o.Outage()
	}
	return 0
}

// Target is one faulted run: the fleet, the product the buyers are
// buying and the strategy they buy with. A ScopeFleet fault striking
// several runs at once gets neither.
type Target struct {
	Fleet   *fleet.Fleet
	Product string
	// Strategy is the strategy the buyers sell with (for ScopeRun faults,
	// the fleet default); Strategies is every strategy the fleet offers
	// (strategy-switch picks from them).
	Strategy   string
	Strategies []Strategy
	// LockTTL is the fleet's INVENTORY_LOCK_TTL: replica-pause pauses for
	// longer than this.
	LockTTL time.Duration
	// Selling is closed once every buyer of the run has its answer: a
	// fault still waiting for its moment then gives up with ErrMissed.
	Selling <-chan struct{}
	// Orders: the buyers hold orders and take them through their steps
	// (the matrix's orders mode), so a fault that acts on an order's life
	// waits for its moment there: replica-kill for a step in flight,
	// pg-restart and pg-failover for held orders past their deadline (the
	// expiry job's sweep), redis-restart for holds outstanding.
	Orders bool
}

// strategy is t.Strategy's entry of t.Strategies, or false.
func (t Target) strategy() (Strategy, bool) {
	i := slices.IndexFunc(t.Strategies, func(s Strategy) bool { return s.Name == t.Strategy })
	if i < 0 {
		return Strategy{}, false
	}
	return t.Strategies[i], true
}

// Strategy is one entry of GET /strategies: a strategy and what it is
// (LockBackend, UsesRedis, Batches), the properties that decide which
// faults apply to it.
type Strategy = client.StrategyInfo

// Offered is every strategy the service at baseURL offers, with its
// properties, as its GET /strategies answers.
func Offered(ctx context.Context, baseURL string) ([]Strategy, error) {
	c := client.New(baseURL, client.Options{})
	defer c.CloseIdleConnections()
	list, err := c.Strategies(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /strategies: %w", err)
	}
	return list, nil
}

var (
	// ErrNotApplicable: the fault has nothing to act on with this strategy
	// (no lock for lock-expired-early, no other strategy to switch to):
	// see Applicable.
	ErrNotApplicable = errors.New("fault does not apply to this strategy")
	// ErrNotStruck: the fault applies, but found nothing to strike when
	// its moment came (no lock held in its look window, say): the run was
	// not faulted, and is tried again like a missed one.
	ErrNotStruck = errors.New("the fault found nothing to strike")
	// ErrMissed: the buyers were all answered before the fault's moment
	// came, so the run was not faulted mid-sale.
	ErrMissed = errors.New("the buyers finished before the fault could strike")
)

// All returns a fresh value of every fault, in the order of the design's
// vocabulary.
func All() []Fault {
	return []Fault{
		&ReplicaPause{}, &ReplicaKill{}, &RedisRestart{}, &RedisFailover{}, &RedisClusterFailover{}, &PGRestart{}, &PGFailover{},
		&NetLatency{}, &NetPartition{}, &CommitReplyLost{},
		&LockExpiredEarly{}, &RestockRace{}, &StrategySwitch{}, &ClockJump{}, &RunnerPause{},
	}
}

// Demonstrations returns a fresh value of every fault that breaks even
// the safe strategies by design, to show what a safeguard is for
// (pg-failover-async: the sales a failover loses without synchronous
// replication). All leaves them out; New finds them by name.
func Demonstrations() []Fault {
	return []Fault{&PGFailover{Async: true}}
}

// New returns a fresh value of the fault called name (one of All or of
// Demonstrations), or false.
func New(name string) (Fault, bool) {
	for _, f := range append(All(), Demonstrations()...) {
		if f.Name() == name {
			return f, true
		}
	}
	return nil, false
}

// Names returns the names of All.
func Names() []string {
	var names []string
	for _, f := range All() {
		names = append(names, f.Name())
	}
	return names
}
