package matrix

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"inventory/internal/faults"
	"inventory/internal/fleet"
	"inventory/internal/load"
	"inventory/internal/report"
	"inventory/internal/verdict"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Options are a fault matrix's settings; Defaults gives the load tester's.
type Options struct {
	// Strategies is the comma-separated strategies to run; empty: every
	// one the fleet offers.
	Strategies string
	// Runs is the faulted runs per cell (strategy × fault).
	Runs int
	// Stock is the units in stock at the start of each run, Buyers the
	// buyers per run (one unit each), Concurrency how many are in flight
	// at once.
	Stock       int64
	Buyers      int
	Concurrency int
	// Retries is how often a buyer without a definite answer retries with
	// the same Idempotency-Key.
	Retries int
	// WorkDelay and LockTTL are the replicas' INVENTORY_WORK_DELAY and
	// INVENTORY_LOCK_TTL; replica-pause pauses for twice LockTTL.
	WorkDelay, LockTTL time.Duration
	// Spread is how long, side by side, each run's buyers take at least to
	// start, so that the fastest strategies are still selling when the
	// slowest reach the fault's moment (0: as fast as they can).
	Spread time.Duration
	// WaveWithin is how long the wave of buyers sent once a run's fault
	// has healed has to buy what is left (load.Config.WaveWithin; 0:
	// load.DefaultWaveWithin).
	WaveWithin time.Duration
	// Fleets is how many fleets run at once, each with its own group of
	// faults (the groups in order, the next starting when one ends).
	// Default (0 or 1): one at a time. Side by side the fleets share the
	// machine's cores; the runs' timing (Spread, the shared strikes' tries)
	// adapts, so the verdicts are the same, only the latencies are not
	// each fleet's own.
	Fleets int
	// Orders, when set, is the orders mode: each run's buyers follow this
	// order scenario (load.Config.Orders: holds abandoned to the expiry
	// job, cancelled, paid at the deadline, …), each run waits for its held
	// orders to end, and its verdict holds every invariant of an order's
	// life read from Postgres. Its SweepBound, when 0, is the fleet's:
	// load.SweepBound(LockTTL, SweepInterval). Holds carry their buyers'
	// Idempotency-Keys and are retried (Retries) as sales are, so an
	// answer a fault lost is settled from the ledger and the history is
	// checked. Nil: buyers buy outright.
	Orders *load.OrderScenario
	// SweepInterval is the replicas' INVENTORY_ORDER_SWEEP_INTERVAL (0:
	// the service's default, DefaultSweepInterval).
	SweepInterval time.Duration
	// LogDir, when set, keeps each fleet's processes' output (the
	// replicas', Postgres's, …) in a directory of its own under it, named
	// after the fleet's faults (fleet.Options.LogDir): what a cell that
	// broke has to say, such as the expiry job's runner's log. "": output
	// is kept in memory only.
	LogDir string
}

// DefaultSweepInterval is the service's INVENTORY_ORDER_SWEEP_INTERVAL
// default: how often the expiry job sweeps when SweepInterval is 0.
const DefaultSweepInterval = time.Second

// DefaultOrders is the orders mode's scenario (`loadtest faults
// --orders`): three in five buyers hold for 1 s, the shortest pay_within
// the service takes, so that holds made before the fault are due while it
// strikes; of the holders, two in five abandon their order (the expiry job
// returns its units, mid-fault), one in five cancels, one in five pays
// right at the deadline (racing the sweep), the rest pay at once, and of
// those some are refunded or shipped; every step is sent twice.
func DefaultOrders() load.OrderScenario {
	return load.OrderScenario{Hold: 0.6, PayWithin: time.Second, Abandon: 0.4, Cancel: 0.2, PayAtDeadline: 0.2,
		Refund: 0.3, Ship: 0.5, RetrySteps: true}
}

// orders is the order scenario of o's runs, its sweep's bound set (nil
// when o is not in orders mode).
func (o Options) orders() *load.OrderScenario {
	if o.Orders == nil {
		return nil
	}
	s := *o.Orders
	if s.SweepBound == 0 {
		s.SweepBound = load.SweepBound(o.LockTTL, cmp.Or(o.SweepInterval, DefaultSweepInterval))
	}
	return &s
}

// Defaults are the settings of `loadtest faults` with no flags.
func Defaults() Options {
	return Options{Runs: 3, Stock: 120, Buyers: 200, Concurrency: 16, Retries: 3,
		WorkDelay: load.DefaultWorkDelay, LockTTL: time.Second, Spread: 6 * time.Second, Fleets: 1}
}

// matrixFleet is the fleet a fault runs on unless it needs another
// (faults.FleetNeeds): bin's replicas, durable, each reaching Postgres and
// Redis through links of its own.
func matrixFleet(o Options, bin string) fleet.Options {
	env := map[string]string{"INVENTORY_WORK_DELAY": o.WorkDelay.String(), "INVENTORY_LOCK_TTL": o.LockTTL.String()}
	if o.SweepInterval > 0 {
		env["INVENTORY_ORDER_SWEEP_INTERVAL"] = o.SweepInterval.String()
	}
	return fleet.Options{
		Replicas: 2,
		Binary:   bin,
		// Each replica reaches Postgres and Redis through links of its own,
		// which net-latency and net-partition act on.
		NetLinks: true,
		// Durable: an immediate Postgres restart must not lose what it acknowledged.
		Env: env,
	}
}

// fleetGroup is the faults that run on one fleet, started with opts.
type fleetGroup struct {
	opts   fleet.Options
	faults []faults.Fault
}

// groupByFleet groups fl by the fleet each fault needs (faults.FleetOptions
// of base), the groups in the order of their first fault in fl.
func groupByFleet(base fleet.Options, fl []faults.Fault) []fleetGroup {
	var groups []fleetGroup
	for _, f := range fl {
		opts := faults.FleetOptions(f, base)
		i := slices.IndexFunc(groups, func(g fleetGroup) bool { return reflect.DeepEqual(g.opts, opts) })
		if i < 0 {
			groups = append(groups, fleetGroup{opts: opts})
			i = len(groups) - 1
		}
		groups[i].faults = append(groups[i].faults, f)
	}
	return groups
}

// Run runs the fault matrix of fl on local fleets: one per group of
// faults that need the same fleet, o.Fleets of them at once (by default one
// at a time, each stopped before the next starts), from one build of the
// service. The cells come back as one matrix, in fl's order. (Starting the
// next fleet while a group ran hid its ~8 s start, but on two cores it
// slowed that group's first round: faults struck 9–14 s in instead of
// 1–4 s, after the fastest strategies' buyers had finished, and runs
// missed.)
func Run(ctx context.Context, o Options, fl []faults.Fault, log io.Writer) (report.Matrix, error) {
	dir, err := os.MkdirTemp("", "inventory-faults-")
	if err != nil {
		return report.Matrix{}, fmt.Errorf("fault matrix: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "inventory")
	if err := fleet.Build(ctx, bin); err != nil {
		return report.Matrix{}, err
	}
	groups := groupByFleet(matrixFleet(o, bin), fl)
	parts := make([]report.Matrix, len(groups))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.Fleets, 1))
	out := &lineWriter{w: log}
	for i, group := range groups {
		g.Go(func() error {
			m, err := matrixOnFleet(gctx, o, group, out)
			parts[i] = m
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return report.Matrix{}, err
	}
	return mergeMatrices(parts, fl), nil
}

// lineWriter lets fleets running at once write their progress to one
// writer, a whole Write (a line, as the runners write them) at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// matrixOnFleet starts g's fleet, runs g's faults on it and stops it.
func matrixOnFleet(ctx context.Context, o Options, g fleetGroup, log io.Writer) (report.Matrix, error) {
	var names []string
	for _, f := range g.faults {
		names = append(names, f.Name())
	}
	fmt.Fprintf(log, "starting a local fleet for %s: %s …\n", strings.Join(names, ", "), describeFleet(g.opts))
	opts := g.opts
	if o.LogDir != "" {
		// A directory per fleet: fleets one after another write the same names.
		opts.LogDir = filepath.Join(o.LogDir, strings.Join(names, "+"))
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return report.Matrix{}, fmt.Errorf("fault matrix: the fleet's log directory: %w", err)
		}
		fmt.Fprintf(log, "  its processes' output goes to %s\n", opts.LogDir)
	}
	f, err := fleet.Start(ctx, opts)
	if err != nil {
		return report.Matrix{}, err
	}
	defer func() {
		fmt.Fprintln(log, "stopping the local fleet …")
		if err := f.Stop(); err != nil {
			fmt.Fprintln(log, "loadtest:", err)
		}
	}()
	m, err := faultMatrix(ctx, f, o, g.faults, log)
	if err != nil {
		r := f.Replicas[0]
		return report.Matrix{}, fmt.Errorf("%w\n%s's last output:\n%s", err, r.Instance, lastBytes(r.Logs(), 3000))
	}
	return m, nil
}

// describeFleet says in a few words what a fleet started with opts runs.
func describeFleet(opts fleet.Options) string {
	redis := "Redis"
	switch {
	case opts.RedisSentinel:
		redis = "Redis with a replica and a Sentinel (the replicas reach Redis through it)"
	case opts.RedisReplica:
		redis = "Redis with a replica"
	}
	if opts.FakeClock {
		redis += " (it and the first Redlock server under libfaketime)"
	}
	links := ""
	switch {
	case opts.NetLinks && opts.RedisSentinel:
		links = ", each through a proxy link of its own to Postgres"
	case opts.NetLinks:
		links = ", each through proxy links of its own"
	}
	postgres := "Postgres (durable)"
	switch {
	case opts.PostgresAsync:
		postgres = "Postgres (durable) as a primary and an asynchronous standby under Patroni"
	case opts.PostgresHA:
		postgres = "Postgres (durable) as a primary and a synchronous standby under Patroni"
	}
	return fmt.Sprintf("%s, %s, %d replicas (INVENTORY_WORK_DELAY=%s, INVENTORY_LOCK_TTL=%s%s), nginx",
		postgres, redis, opts.Replicas, opts.Env["INVENTORY_WORK_DELAY"], opts.Env["INVENTORY_LOCK_TTL"], links)
}

// mergeMatrices makes one matrix of the matrices of fl's faults run on
// several fleets: the first's settings, every strategy, the faults, their
// times and the cells in fl's order.
func mergeMatrices(parts []report.Matrix, fl []faults.Fault) report.Matrix {
	if len(parts) == 0 {
		return report.Matrix{}
	}
	m := parts[0]
	m.Strategies, m.Faults, m.Cells, m.FaultSeconds = nil, nil, nil, nil
	cells := map[[2]string]report.Cell{}
	seconds := map[string]float64{}
	for _, p := range parts {
		for _, s := range p.Strategies {
			if !slices.Contains(m.Strategies, s) {
				m.Strategies = append(m.Strategies, s)
			}
		}
		for _, c := range p.Cells {
			cells[[2]string{c.Strategy, c.Fault}] = c
		}
		for i, name := range p.Faults {
			seconds[name] = p.FaultSeconds[i]
		}
		m.Failed = m.Failed || p.Failed
	}
	for _, f := range fl {
		m.Faults = append(m.Faults, f.Name())
		m.FaultSeconds = append(m.FaultSeconds, seconds[f.Name()])
	}
	for _, s := range m.Strategies {
		for _, f := range m.Faults {
			if c, ok := cells[[2]string{s.Name, f}]; ok {
				m.Cells = append(m.Cells, c)
			}
		}
	}
	return m
}

// lastBytes is the last n bytes of s.
func lastBytes(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// faultMatrix runs every strategy the fleet offers (or o.Strategies) ×
// every fault of fl, o.Runs faulted runs per cell, against f. Under a fault
// that reaches the whole fleet or one product (faults.ScopeOf), the
// strategies' runs go side by side, each buying a product of its own with
// its own strategy; under the others, one run at a time with the strategy
// as the fleet default.
func faultMatrix(ctx context.Context, f *fleet.Fleet, o Options, fl []faults.Fault, log io.Writer) (report.Matrix, error) {
	probe := load.NewClient(f.URL, f.AdminToken, 1, nil)
	strategies, err := load.PickStrategies(ctx, probe, o.Strategies, log)
	probe.Close()
	if err != nil {
		return report.Matrix{}, err
	}
	soldOut, err := startSoldOutLog(f.URL)
	if err != nil {
		return report.Matrix{}, err
	}
	defer soldOut.Close()
	mr := &matrixRun{
		c: load.NewClient(soldOut.URL, f.AdminToken, o.Concurrency*len(strategies), nil), o: o, fleet: f,
		stamp: time.Now().Unix() % 1_000_000, spread: o.Spread, log: log, soldOut: soldOut,
	}
	defer mr.c.Close()
	// What each strategy is (its lock backend, whether it uses Redis, …)
	// decides which faults apply to it: GET /strategies says.
	offered, err := faults.Offered(ctx, f.URL)
	if err != nil {
		return report.Matrix{}, err
	}
	for _, s := range strategies {
		i := slices.IndexFunc(offered, func(o faults.Strategy) bool { return o.Name == s.Name })
		if i < 0 {
			return report.Matrix{}, fmt.Errorf("strategy %q is not in the fleet's GET /strategies", s.Name)
		}
		mr.all = append(mr.all, offered[i])
	}
	for _, r := range f.Replicas {
		mr.replicas = append(mr.replicas, r.URL)
	}
	m := report.Matrix{
		StartedAt: time.Now().UTC().Format(time.RFC3339), Runs: o.Runs, Stock: o.Stock, Buyers: o.Buyers,
		Concurrency: o.Concurrency, Retries: o.Retries, WorkDelay: o.WorkDelay.String(), LockTTL: o.LockTTL.String(),
		Spread: o.Spread.String(), Orders: describeOrders(o.orders()),
	}
	for _, s := range strategies {
		m.Strategies = append(m.Strategies, report.StrategyInfo{Name: s.Name, Safe: s.Safe})
	}
	for _, x := range fl {
		m.Faults = append(m.Faults, x.Name())
	}
	byCell := map[[2]string]report.Cell{}
	for _, fault := range fl {
		began := time.Now()
		cells := make([]*runningCell, len(strategies))
		for i, s := range strategies {
			cells[i] = &runningCell{s: s, cell: report.Cell{Strategy: s.Name, Fault: fault.Name(), Safe: s.Safe}, breaksLocks: faults.BreaksLocks(fault)}
			if err := faults.AppliesTo(fault, faults.Target{Strategy: s.Name, Strategies: mr.all}); err != nil {
				cells[i].cell.NotApplicable = err.Error()
			}
		}
		if faults.ScopeOf(fault) == faults.ScopeRun {
			for _, rc := range cells {
				if err := mr.oneAtATime(ctx, rc, fault); err != nil {
					return report.Matrix{}, err
				}
				mr.report(log, rc)
			}
		} else {
			if err := mr.sideBySide(ctx, cells, fault); err != nil {
				return report.Matrix{}, err
			}
			for _, rc := range cells {
				mr.report(log, rc)
			}
		}
		for _, rc := range cells {
			byCell[[2]string{rc.s.Name, fault.Name()}] = rc.cell
			m.Failed = m.Failed || rc.cell.Fails
		}
		took := time.Since(began).Round(100 * time.Millisecond)
		m.FaultSeconds = append(m.FaultSeconds, took.Seconds())
		fmt.Fprintf(log, "%s: %v\n", fault.Name(), took)
	}
	for _, s := range strategies { // rows in the strategies' order, as GET /strategies lists them
		for _, fault := range fl {
			m.Cells = append(m.Cells, byCell[[2]string{s.Name, fault.Name()}])
		}
	}
	return m, nil
}

// matrixRun is what every run of one fault matrix shares.
type matrixRun struct {
	c        *load.Client
	o        Options
	fleet    *fleet.Fleet
	all      []faults.Strategy
	replicas []string // the replicas' own URLs, for their metrics
	stamp    int64    // makes this matrix's product ids its own
	// spread is how long the buyers of each run of a side-by-side round
	// take at least to start: o.Spread, or twice as long as the last
	// round of every applicable cell took to reach the fault's moment, so
	// that the fastest strategies are still selling when it comes.
	spread time.Duration
	log    io.Writer // progress
	// defaultTurn counts side-by-side rounds across faults: round n's
	// default cell is the (n mod k)th of its k safe cells.
	defaultTurn int
	// soldOut notes when the buyers' sales answered 409 were sent, so that
	// a sold-out after the fault healed fails the run.
	soldOut *soldOutLog
}

// maxScale bounds matrixRun.scale.
const maxScale = 64

// runningCell is one cell being run: a strategy under the fault at hand.
type runningCell struct {
	s     load.StrategyInfo
	cell  report.Cell
	tries int // runs started, missed ones included
	// missedInARow is the runs missed since the last judged one; misses
	// says why each missed run was not struck.
	missedInARow int
	misses       []string
	// refused is what the fault said when it reported, at run time, that
	// it does not apply to the strategy it had declared it applies to.
	refused string
	// breaksLocks: the fault declares that its strike breaks locks
	// (faults.LockBreaker).
	breaksLocks bool
}

// triesPerRun is how often the matrix tries a run whose fault did not
// strike (its buyers finished first, or it found nothing to act on) before
// the cell fails as DID NOT STRIKE.
const triesPerRun = 3

// NotStruck is the verdict of the run a cell fails with when its fault,
// applicable to the strategy, never struck in triesPerRun tries, said at
// run time that it does not apply, or never showed the effect it declares:
// a cell that proved nothing must not pass.
const NotStruck = verdict.NotStruck

// grow is the scale after a missed run.
func grow(scale int64) int64 { return min(4*max(scale, 1), maxScale) }

// open reports whether the cell wants another run: the fault applies (as
// declared, and as it said when it struck), fewer than o.Runs are judged
// (or, for a fault that must break a lock, none of the judged runs has
// shown one broken and fewer than triesPerRun extra runs were made), and
// the run at hand has not missed triesPerRun times in a row. A judged run
// that broke no lock is still judged, every invariant of it: only the
// cell's proof that the fault struck is sought again.
func (rc *runningCell) open(o Options) bool {
	wanted := rc.cell.Runs < o.Runs ||
		rc.breaksLocks && !rc.brokeALock() && rc.cell.Runs < o.Runs+triesPerRun-1
	return rc.cell.NotApplicable == "" && rc.refused == "" && wanted && rc.missedInARow < triesPerRun
}

// brokeALock reports whether a judged run of the cell showed a lock broken.
func (rc *runningCell) brokeALock() bool {
	for _, r := range rc.cell.Results {
		if r.LocksBroken() > 0 {
			return true
		}
	}
	return false
}

// finish closes the cell with verdict.JudgeCell's verdict; a cell
// that did not strike gets a failing run saying why.
func (rc *runningCell) finish(o Options) {
	c := verdict.Cell{Safe: rc.s.Safe, NotApplicable: rc.cell.NotApplicable, Wanted: o.Runs, Misses: rc.misses,
		MissedInARow: rc.missedInARow, Refused: rc.refused, MustBreakLocks: rc.breaksLocks}
	for _, r := range rc.cell.Results {
		c.Runs = append(c.Runs, verdict.CellRun{Verdict: r.Verdict, Reasons: r.Reasons, LocksBroken: r.LocksBroken()})
	}
	j := verdict.JudgeCell(c)
	if j.NotStruck != "" {
		res := load.Result{Run: rc.tries, Strategy: rc.s.Name, Safe: rc.s.Safe}
		rc.cell.MarkNotStruck(report.FaultRun{Result: res}, j.NotStruck)
	}
	rc.cell.Kept, rc.cell.SafeBroke, rc.cell.Failing, rc.cell.Fails = j.Kept, j.SafeBroke, j.Failing, j.Fails
}

// next starts the cell's next run: its product, and o's stock and buyers
// times scale.
func (mr *matrixRun) next(rc *runningCell, fault faults.Fault, scale int64) (product string, size Options) {
	rc.tries++
	size = mr.o
	if scale > 1 {
		size.Stock, size.Buyers = scale*size.Stock, int(scale)*size.Buyers
	}
	return fmt.Sprintf("f%d-%s-%s-%d", mr.stamp, rc.s.Name, fault.Name(), rc.tries), size
}

// record adds a run's outcome to its cell, and reports whether the run was
// missed (the fault found its buyers all answered).
func (mr *matrixRun) record(rc *runningCell, fault faults.Fault, res report.FaultRun, err error) (missed bool, _ error) {
	switch {
	// A fault that declared it applies (faults.AppliesTo) and then says it
	// does not contradicts its declaration: the cell proved nothing, and
	// fails; it is not tried again.
	case errors.Is(err, faults.ErrNotApplicable):
		rc.refused = fmt.Sprintf("try %d: %v", rc.tries, err)
		fmt.Fprintf(mr.log, "  %s × %s try %d: the fault declared it applies, then said it does not: %v\n", rc.s.Name, fault.Name(), rc.tries, err)
		return false, nil
	// A fault that applies yet finds nothing to act on when it strikes
	// was not struck: the run is tried again, never the cell skipped.
	case errors.Is(err, faults.ErrMissed), errors.Is(err, faults.ErrNotStruck):
		rc.cell.Missed++
		rc.missedInARow++
		rc.misses = append(rc.misses, fmt.Sprintf("try %d: %v", rc.tries, err))
		fmt.Fprintf(mr.log, "  %s × %s try %d did not strike (%d of %d for this run): %v\n",
			rc.s.Name, fault.Name(), rc.tries, rc.missedInARow, triesPerRun, err)
		return true, nil
	case err != nil:
		return false, fmt.Errorf("%s × %s run %d: %w", rc.s.Name, fault.Name(), rc.tries, err)
	default:
		res.Run = rc.tries
		rc.missedInARow = 0
		rc.cell.Add(res)
	}
	return false, nil
}

func (mr *matrixRun) report(log io.Writer, rc *runningCell) {
	rc.finish(mr.o)
	fmt.Fprintf(log, "%-10s × %-18s %s\n", rc.s.Name, rc.cell.Fault, rc.cell.Summary())
	if rc.cell.NotStruck != "" {
		fmt.Fprintf(log, "%-10s × %-18s %s: the cell fails (%d tries)\n", rc.s.Name, rc.cell.Fault, NotStruck, rc.tries)
	}
}

func (mr *matrixRun) target(rc *runningCell, product string) faults.Target {
	return faults.Target{Fleet: mr.fleet, Product: product, Strategy: rc.s.Name, Strategies: mr.all, LockTTL: mr.o.LockTTL,
		Orders: mr.o.Orders != nil}
}

// oneAtATime runs a cell's runs one after another, the strategy being the
// fleet default: buyers name none, so strategy-switch acts as it would in
// production.
func (mr *matrixRun) oneAtATime(ctx context.Context, rc *runningCell, fault faults.Fault) error {
	scale := int64(1)
	for rc.open(mr.o) {
		product, size := mr.next(rc, fault, scale)
		t := mr.target(rc, product)
		sc := load.Scenario{Name: rc.s.Name, Safe: rc.s.Safe, Switch: []string{rc.s.Name}}
		soldWith := rc.s.Name
		if faults.ChangesDefault(fault) {
			soldWith = ""
		}
		res, err := mr.faultedRun(ctx, rc.s, size, product, sc, soldWith, 0, strikeAlone(fault, t, strikeAt(size)), fault)
		missed, err := mr.record(rc, fault, res, err)
		if err != nil {
			return err
		}
		if missed {
			scale = grow(scale)
		}
	}
	return nil
}

// sideBySide runs every cell's runs at once, round after round
// until each has its runs: each run buys a product of its own naming its
// strategy, but for one safe cell per round, taken in turn across rounds
// and faults, whose strategy is made the fleet default and whose buyers
// name none, so that the default itself is under the fault too. A
// ScopeFleet fault strikes once per round for all of them (sharedStrike); a
// ScopeProduct fault strikes each run on its own.
func (mr *matrixRun) sideBySide(ctx context.Context, cells []*runningCell, fault faults.Fault) error {
	for {
		var open []*runningCell
		for _, rc := range cells {
			if rc.open(mr.o) {
				open = append(open, rc)
			}
		}
		if len(open) == 0 {
			return nil
		}
		byDefault := -1 // the cell whose buyers name none
		var safe []int
		for i, rc := range open {
			if rc.s.Safe {
				safe = append(safe, i)
			}
		}
		if len(safe) > 0 {
			byDefault = safe[mr.defaultTurn%len(safe)]
			mr.defaultTurn++
			fmt.Fprintf(mr.log, "  %s: %s sells as the fleet default this round, its buyers naming none\n", fault.Name(), open[byDefault].s.Name)
		}
		// Each run's product (placed where the fault strikes, for a
		// Colocator) and size.
		products, sizes := make([]string, len(open)), make([]Options, len(open))
		for i, rc := range open {
			products[i], sizes[i] = mr.next(rc, fault, 1)
			if c, ok := fault.(faults.Colocator); ok {
				var err error
				if products[i], err = c.Colocate(ctx, mr.fleet, products[i]); err != nil {
					return fmt.Errorf("%s × %s: place the run's product: %w", rc.s.Name, fault.Name(), err)
				}
			}
		}
		var shared *sharedStrike
		spread := time.Duration(0) // a fault of its own strikes each run at its own moment
		began := time.Now()
		if faults.ScopeOf(fault) == faults.ScopeFleet {
			shared = newSharedStrike(len(open))
			go shared.inject(ctx, fault, faults.Target{Fleet: mr.fleet, Strategies: mr.all, LockTTL: mr.o.LockTTL, Orders: mr.o.Orders != nil})
			spread = mr.spread
		}
		type outcome struct {
			res report.FaultRun
			err error
		}
		got := make([]outcome, len(open))
		var wg sync.WaitGroup
		for i, rc := range open {
			product, size := products[i], sizes[i]
			wg.Go(func() {
				var strike func(context.Context, func() int64, <-chan struct{}) error
				var struck faults.Fault // the value that strikes this run, for its record
				if shared != nil {
					defer shared.leave(i)
					strike, struck = shared.strikeFor(i, strikeAt(size)), fault
				} else {
					own, _ := faults.New(fault.Name()) // a value per run: it keeps what it must heal
					strike, struck = strikeAlone(own, mr.target(rc, product), strikeAt(size)), own
				}
				sc := load.Scenario{Name: rc.s.Name, Safe: rc.s.Safe, Sell: []string{rc.s.Name}}
				soldWith := ""
				if i == byDefault {
					sc.Sell, sc.Switch, soldWith = nil, []string{rc.s.Name}, rc.s.Name
				}
				got[i].res, got[i].err = mr.faultedRun(ctx, rc.s, size, product, sc, soldWith, spread, strike, struck)
			})
		}
		wg.Wait()
		if shared != nil {
			<-shared.done
			if !shared.struckAt.IsZero() {
				delay := shared.struckAt.Sub(began)
				mr.spread = nextSpread(mr.o.Spread, mr.spread, delay, len(open) == applicable(cells))
				fmt.Fprintf(mr.log, "  %s: struck %d runs after %v; next spread %v\n", fault.Name(), shared.hit, delay.Round(100*time.Millisecond), mr.spread)
			}
		}
		for i, rc := range open {
			if _, err := mr.record(rc, fault, got[i].res, got[i].err); err != nil {
				return err
			}
		}
	}
}

// nextSpread is the spread of the next side-by-side round, after one
// whose fault struck delay after it began: twice delay, at least floor. Only
// a round of every applicable cell (everyCell) tells how long the slowest
// take to reach the fault's moment; a round of the few that missed (the
// fastest, done before the slowest got there) strikes at once, and a
// spread cut to it had the next fault's fastest runs miss again, round
// after round, so such a round keeps cur.
func nextSpread(floor, cur, delay time.Duration, everyCell bool) time.Duration {
	if !everyCell {
		return cur
	}
	return max(floor, 2*delay).Round(100 * time.Millisecond)
}

// applicable is how many of cells the fault applies to.
func applicable(cells []*runningCell) int {
	n := 0
	for _, rc := range cells {
		if rc.cell.NotApplicable == "" {
			n++
		}
	}
	return n
}

// takeSoldOut is when product's sales answered 409 were sent (none
// without a soldOutLog).
func (mr *matrixRun) takeSoldOut(product string) []time.Time {
	if mr.soldOut == nil {
		return nil
	}
	return mr.soldOut.take(product)
}

// strikeAt is how many buyers of a run have their answer when its fault
// strikes: a fifth.
func strikeAt(o Options) int64 { return int64(max(1, o.Buyers/5)) }

// strikeAlone is a run's Strike for a fault of its own: it strikes once
// at answers have been given and heals.
func strikeAlone(fault faults.Fault, t faults.Target, at int64) func(context.Context, func() int64, <-chan struct{}) error {
	return func(ctx context.Context, answered func() int64, selling <-chan struct{}) error {
		if err := awaitAnswers(ctx, answered, at, selling); err != nil {
			return err
		}
		t.Selling = selling
		slog.Debug("fault strikes", "strategy", t.Strategy, "fault", fault.Name(), "product", t.Product, "answered", answered())
		injectErr := fault.Inject(ctx, t)
		// Heal even a half-done injection, then report the first error.
		return errors.Join(injectErr, fault.Heal(context.WithoutCancel(ctx)))
	}
}

// awaitAnswers waits until at buyers have their answer: faults.ErrMissed
// if all of them have theirs first (selling closed).
func awaitAnswers(ctx context.Context, answered func() int64, at int64, selling <-chan struct{}) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for answered() < at {
		select {
		case <-selling:
			return faults.ErrMissed
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// faultedRun is one run of one cell: buyers with Idempotency-Keys buy
// product with strategy s (as sc says: naming it, or as the fleet
// default), starting over at least spread, while strike strikes (struck
// is the fault value that strikes, for its record), then, once the fault
// has healed, a wave of buyers buys what is left (load.Config.WaveWithin).
// load collects the run's evidence; the matrix adds what only it knows
// (the fault, when each 409 was sent, the default the buyers were given)
// and has verdict.Judge judge the run on all of it. The replicas' hold
// logs are then read for holders that overlapped and leases lost.
func (mr *matrixRun) faultedRun(ctx context.Context, s load.StrategyInfo, o Options, product string, sc load.Scenario, soldWith string,
	spread time.Duration, strike func(context.Context, func() int64, <-chan struct{}) error, struck faults.Fault) (report.FaultRun, error) {
	before, err := breachCounts(ctx, mr.replicas, s.Name)
	if err != nil {
		return report.FaultRun{}, err
	}
	cfg := load.Config{
		Product: product, Stock: o.Stock, Buyers: o.Buyers, Concurrency: o.Concurrency,
		Keys: product, Retries: o.Retries, Spread: spread, Strike: strike,
		WaveWithin:  cmp.Or(o.WaveWithin, load.DefaultWaveWithin),
		PostgresURL: mr.fleet.PostgresURL, // the truth: stock, rounds, ledger, circuits and a fault's restocks
	}
	// In orders mode a hold carries its buyer's key as a sale does, and is
	// sent again under it: an answer a fault lost is settled from the
	// ledger, and every row of the ledger is still a buyer's.
	cfg.Orders = o.orders()
	res, err := load.Run(ctx, mr.c, cfg, sc, nil)
	soldOutSent := mr.takeSoldOut(product)
	if err != nil {
		return report.FaultRun{}, err
	}
	ev := res.Evidence
	if ev.Orders != nil {
		soldOutSent = soldOutOnceEnded(soldOutSent, ev.Wave)
		// No replica can expire an order while the fault keeps Postgres
		// (or the job's lock) away from all of them: the job's bound holds
		// from when it is back.
		ev.Orders.SweepBound += faults.OutageOf(struck)
	}
	ev.Fault.Fault, ev.Fault.SoldOutSent, ev.SoldWith = struck.Name(), soldOutSent, soldWith
	res.Judge(ev)
	if s.Safe {
		if during, _, _ := verdict.SoldOutAfterHeal(res.FinalStock, ev.Fault.Healed, soldOutSent); during > 0 {
			fmt.Fprintf(mr.log, "  %s (%s): %d sold-out answers while stock remained, sent while the fault was active\n", product, s.Name, during)
		}
	}
	after, err := breachCounts(ctx, mr.replicas, s.Name)
	if err != nil {
		return report.FaultRun{}, err
	}
	res.BreachMetric = breachDelta(before, after)
	run := report.FaultRun{Result: res, LeasesEnded: int64(faults.LeasesEnded(struck)[product])}
	holds, err := fetchHolds(ctx, mr.replicas, mr.fleet.AdminToken, product)
	if err != nil {
		return report.FaultRun{}, err
	}
	for _, h := range holds {
		if h.Outcome != nil && *h.Outcome == holdLockLost {
			run.LeasesLost++
		}
	}
	ov := verdict.Overlaps(holds, time.Now())
	run.Overlaps = int64(len(ov))
	for _, o := range ov[:min(len(ov), 3)] {
		run.OverlapSample = append(run.OverlapSample, o.Describe())
	}
	return run, nil
}

// soldOutOnceEnded is the sold-outs of sent that were sent once every
// held order of an orders-mode run had ended: those sent to its wave (nil
// without one). Before then, units still come back (an expiry, a cancel, a
// refund), so a 409 sent at a moment when none was left is true even
// though the round ends with units left, which verdict.SoldOutAfterHeal,
// holding that stock only falls within a round, would call false; the
// history check judges those answers, with every return in its window.
func soldOutOnceEnded(sent []time.Time, w *verdict.Wave) []time.Time {
	if w == nil {
		return nil
	}
	var out []time.Time
	for _, t := range sent {
		if !t.Before(w.Began) {
			out = append(out, t)
		}
	}
	return out
}

// describeOrders says in one line what buyers of an orders-mode run do
// ("" for s nil).
func describeOrders(s *load.OrderScenario) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("hold %.2g, pay_within %s (abandon %.2g, cancel %.2g, pay at the deadline %.2g; of the paid: refund %.2g, ship %.2g), steps twice %v, sweep bound %s",
		s.Hold, s.PayWithin, s.Abandon, s.Cancel, s.PayAtDeadline, s.Refund, s.Ship, s.RetrySteps, s.SweepBound)
}

// holdLockLost is the outcome of a hold whose lease was lost under its
// holder, or whose write the database refused as a breach (stock.HoldLockLost).
const holdLockLost = "lock-lost"
