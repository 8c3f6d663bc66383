package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	apiclient "inventory/internal/client"
	"inventory/internal/faults"
	"inventory/internal/fleet"
	"inventory/internal/load"
	"inventory/internal/report"
	"inventory/internal/verdict"
)

// faultOptions are the flags of `loadtest faults`.
type faultOptions struct {
	strategies, faults, jsonOut string
	htmlOut                     string
	runs, buyers, concurrency   int
	stock                       int64
	workDelay, lockTTL, spread  time.Duration
	retries                     int
}

func parseFaultFlags(args []string, stderr io.Writer) (faultOptions, error) {
	var o faultOptions
	fs := flag.NewFlagSet("loadtest faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.strategies, "strategies", "", "comma-separated strategies (default: every one the fleet offers)")
	fs.StringVar(&o.faults, "faults", "", "comma-separated faults (default: all of "+strings.Join(faults.Names(), ", ")+")")
	fs.IntVar(&o.runs, "runs", 3, "faulted runs per cell (strategy × fault)")
	fs.Int64Var(&o.stock, "stock", 120, "units in stock at the start of each run")
	fs.IntVar(&o.buyers, "buyers", 200, "buyers per run, each buying one unit")
	fs.IntVar(&o.concurrency, "concurrency", 16, "buyers in flight at once")
	fs.IntVar(&o.retries, "retries", 3, "how often a buyer without a definite answer retries with the same Idempotency-Key")
	fs.DurationVar(&o.workDelay, "work-delay", defaultWorkDelay, "INVENTORY_WORK_DELAY for the replicas (keeps buyers inside their critical sections)")
	fs.DurationVar(&o.lockTTL, "lock-ttl", time.Second, "INVENTORY_LOCK_TTL for the replicas; replica-pause pauses for twice this")
	fs.DurationVar(&o.spread, "spread", 6*time.Second, "side by side, each run's buyers start over at least this long, so the fastest strategies are still selling when the slowest reach the fault's moment (0: as fast as they can)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the matrix as JSON to this file, or - for stdout (the table then goes to stderr)")
	fs.StringVar(&o.htmlOut, "html", "", "also write the matrix as a self-contained HTML heat map to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case o.runs < 1, o.stock < 1, o.buyers < 1, o.concurrency < 1:
		return o, fmt.Errorf("%w: --runs, --stock, --buyers and --concurrency must be at least 1", errUsage)
	case o.retries < 1:
		return o, fmt.Errorf("%w: --retries must be at least 1 (buyers retry a 503 with the same key at least once)", errUsage)
	case o.lockTTL <= 0 || o.workDelay < 0 || o.spread < 0:
		return o, fmt.Errorf("%w: --lock-ttl must be positive, --work-delay and --spread not negative", errUsage)
	}
	return o, nil
}

// pickFaults returns the faults named in list (all when empty).
func pickFaults(list string) ([]faults.Fault, error) {
	all := faults.All()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var out []faults.Fault
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(f faults.Fault) bool { return f.Name() == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown fault %q (want one of %s)", errUsage, name, strings.Join(faults.Names(), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// runFaults is `loadtest faults`: it runs every strategy × fault o.runs
// times on local fleets (matrixOnFleets), then prints the matrix.
func runFaults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFaultFlags(args, stderr)
	if err != nil {
		return err
	}
	fl, err := pickFaults(o.faults)
	if err != nil {
		return err
	}
	m, err := matrixOnFleets(ctx, o, fl, stderr)
	if err != nil {
		return err
	}
	tableOut := stdout
	if o.jsonOut == "-" {
		tableOut = stderr
	}
	report.PrintMatrix(tableOut, m, isTerminal(tableOut))
	if o.jsonOut != "" {
		if err := report.WriteReport(o.jsonOut, stdout, m); err != nil {
			return err
		}
	}
	if o.htmlOut != "" {
		if err := report.WriteHTML(o.htmlOut, nil, &m); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: %s\n", report.AbsPath(o.htmlOut))
	}
	if m.Failed {
		return errSafeBroke
	}
	return nil
}

// matrixFleet is the fleet a fault runs on unless it needs another
// (faults.FleetNeeds): bin's replicas, durable, each reaching Postgres and
// Redis through links of its own.
func matrixFleet(o faultOptions, bin string) fleet.Options {
	return fleet.Options{
		Replicas: 2,
		Binary:   bin,
		// Each replica reaches Postgres and Redis through links of its own,
		// which net-latency and net-partition act on.
		NetLinks: true,
		// Durable: an immediate Postgres restart must not lose what it acknowledged.
		Env: map[string]string{"INVENTORY_WORK_DELAY": o.workDelay.String(), "INVENTORY_LOCK_TTL": o.lockTTL.String()},
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

// matrixOnFleets runs the fault matrix of fl on local fleets: one per
// group of faults that need the same fleet, started in turn (each stopped
// before the next starts), from one build of the service. The cells come
// back as one matrix, in fl's order.
func matrixOnFleets(ctx context.Context, o faultOptions, fl []faults.Fault, log io.Writer) (report.Matrix, error) {
	dir, err := os.MkdirTemp("", "inventory-faults-")
	if err != nil {
		return report.Matrix{}, fmt.Errorf("fault matrix: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "inventory")
	if err := fleet.Build(ctx, bin); err != nil {
		return report.Matrix{}, err
	}
	var parts []report.Matrix
	for _, g := range groupByFleet(matrixFleet(o, bin), fl) {
		m, err := matrixOnFleet(ctx, o, g, log)
		if err != nil {
			return report.Matrix{}, err
		}
		parts = append(parts, m)
	}
	return mergeMatrices(parts, fl), nil
}

// matrixOnFleet starts g's fleet, runs g's faults on it and stops it.
func matrixOnFleet(ctx context.Context, o faultOptions, g fleetGroup, log io.Writer) (report.Matrix, error) {
	var names []string
	for _, f := range g.faults {
		names = append(names, f.Name())
	}
	fmt.Fprintf(log, "starting a local fleet for %s: %s …\n", strings.Join(names, ", "), describeFleet(g.opts))
	f, err := fleet.Start(ctx, g.opts)
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
	links := ""
	switch {
	case opts.NetLinks && opts.RedisSentinel:
		links = ", each through a proxy link of its own to Postgres"
	case opts.NetLinks:
		links = ", each through proxy links of its own"
	}
	return fmt.Sprintf("Postgres (durable), %s, %d replicas (INVENTORY_WORK_DELAY=%s, INVENTORY_LOCK_TTL=%s%s), nginx",
		redis, opts.Replicas, opts.Env["INVENTORY_WORK_DELAY"], opts.Env["INVENTORY_LOCK_TTL"], links)
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

// errSafeBroke is returned after the matrix is printed when a safe strategy broke an invariant under a fault.
var errSafeBroke = errors.New("a safe strategy broke an invariant under a fault (see the red cells above)")

// faultMatrix runs every strategy the fleet offers (or o.strategies) ×
// every fault of fl, o.runs faulted runs per cell, against f. Under a fault
// that reaches the whole fleet or one product (faults.ScopeOf), the
// strategies' runs go side by side, each buying a product of its own with
// its own strategy; under the others, one run at a time with the strategy
// as the fleet default.
func faultMatrix(ctx context.Context, f *fleet.Fleet, o faultOptions, fl []faults.Fault, log io.Writer) (report.Matrix, error) {
	probe := load.NewClient(f.URL, f.AdminToken, 1)
	strategies, err := load.PickStrategies(ctx, probe, o.strategies, log)
	probe.Close()
	if err != nil {
		return report.Matrix{}, err
	}
	mr := &matrixRun{
		c: load.NewClient(f.URL, f.AdminToken, o.concurrency*len(strategies)), o: o, fleet: f,
		stamp: time.Now().Unix() % 1_000_000, spread: o.spread, log: log,
	}
	defer mr.c.Close()
	for _, s := range strategies {
		mr.all = append(mr.all, faults.Strategy{Name: s.Name, Safe: s.Safe})
	}
	for _, r := range f.Replicas {
		mr.replicas = append(mr.replicas, r.URL)
	}
	m := report.Matrix{
		StartedAt: time.Now().UTC().Format(time.RFC3339), Runs: o.runs, Stock: o.stock, Buyers: o.buyers,
		Concurrency: o.concurrency, Retries: o.retries, WorkDelay: o.workDelay.String(), LockTTL: o.lockTTL.String(),
		Spread: o.spread.String(),
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
		lanes := make([]*lane, len(strategies))
		for i, s := range strategies {
			lanes[i] = &lane{s: s, cell: report.Cell{Strategy: s.Name, Fault: fault.Name(), Safe: s.Safe}}
		}
		if faults.ScopeOf(fault) == faults.ScopeRun {
			for _, l := range lanes {
				if err := mr.oneAtATime(ctx, l, fault); err != nil {
					return report.Matrix{}, err
				}
				mr.report(log, l)
			}
		} else {
			if err := mr.sideBySide(ctx, lanes, fault); err != nil {
				return report.Matrix{}, err
			}
			for _, l := range lanes {
				mr.report(log, l)
			}
		}
		for _, l := range lanes {
			byCell[[2]string{l.s.Name, fault.Name()}] = l.cell
			m.Failed = m.Failed || l.cell.SafeBroke
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
	o        faultOptions
	fleet    *fleet.Fleet
	all      []faults.Strategy
	replicas []string // the replicas' own URLs, for their metrics
	stamp    int64    // makes this matrix's product ids its own
	// spread is how long the buyers of each run of a side-by-side round
	// take at least to start: o.spread, or twice as long as the last
	// round took to reach the fault's moment, so that the fastest
	// strategies are still selling when it comes.
	spread time.Duration
	log    io.Writer // progress
	// defaultTurn counts side-by-side rounds across faults: round n's
	// default lane is the (n mod k)th of its k safe lanes.
	defaultTurn int
}

// maxScale bounds matrixRun.scale.
const maxScale = 64

// lane is one cell being run: a strategy under the fault at hand.
type lane struct {
	s     load.StrategyInfo
	cell  report.Cell
	tries int // runs started, missed ones included
}

// grow is the scale after a missed run.
func grow(scale int64) int64 { return min(4*max(scale, 1), maxScale) }

// open reports whether the cell wants another run: fewer than o.runs
// judged, and not more than two missed.
func (l *lane) open(o faultOptions) bool {
	return l.cell.NotApplicable == "" && l.cell.Runs < o.runs && l.tries < o.runs+2
}

// next starts the lane's next run: its product, and o's stock and buyers
// times scale.
func (mr *matrixRun) next(l *lane, fault faults.Fault, scale int64) (product string, size faultOptions) {
	l.tries++
	size = mr.o
	if scale > 1 {
		size.stock, size.buyers = scale*size.stock, int(scale)*size.buyers
	}
	return fmt.Sprintf("f%d-%s-%s-%d", mr.stamp, l.s.Name, fault.Name(), l.tries), size
}

// record adds a run's outcome to its cell, and reports whether the run was
// missed (the fault found its buyers all answered).
func (mr *matrixRun) record(l *lane, fault faults.Fault, res report.FaultRun, err error) (missed bool, _ error) {
	switch {
	case errors.Is(err, faults.ErrNotApplicable):
		l.cell.NotApplicable = err.Error()
	case errors.Is(err, faults.ErrMissed):
		l.cell.Missed++
		return true, nil
	case err != nil:
		return false, fmt.Errorf("%s × %s run %d: %w", l.s.Name, fault.Name(), l.tries, err)
	default:
		res.Run = l.tries
		l.cell.Add(res)
	}
	return false, nil
}

func (mr *matrixRun) report(log io.Writer, l *lane) {
	l.cell.Finish()
	fmt.Fprintf(log, "%-10s × %-18s %s\n", l.s.Name, l.cell.Fault, l.cell.Summary())
}

func (mr *matrixRun) target(l *lane, product string) faults.Target {
	return faults.Target{Fleet: mr.fleet, Product: product, Strategy: l.s.Name, Strategies: mr.all, LockTTL: mr.o.lockTTL}
}

// oneAtATime runs a cell's runs one after another, the strategy being the
// fleet default: buyers name none, so strategy-switch acts as it would in
// production.
func (mr *matrixRun) oneAtATime(ctx context.Context, l *lane, fault faults.Fault) error {
	scale := int64(1)
	for l.open(mr.o) {
		product, size := mr.next(l, fault, scale)
		t := mr.target(l, product)
		sc := load.Scenario{Name: l.s.Name, Safe: l.s.Safe, Switch: []string{l.s.Name}}
		soldWith := l.s.Name
		if faults.ChangesDefault(fault) {
			soldWith = ""
		}
		res, err := mr.faultedRun(ctx, l.s, size, product, sc, soldWith, 0, strikeAlone(fault, t, strikeAt(size)))
		missed, err := mr.record(l, fault, res, err)
		if err != nil {
			return err
		}
		if missed {
			scale = grow(scale)
		}
	}
	return nil
}

// sideBySide runs the cells of every lane at once, round after round
// until each has its runs: each run buys a product of its own naming its
// strategy, but for one safe lane per round, taken in turn across rounds
// and faults, whose strategy is made the fleet default and whose buyers
// name none, so that the default itself is under the fault too. A
// ScopeFleet fault strikes once per round for all of them (strikeBoard); a
// ScopeProduct fault strikes each run on its own.
func (mr *matrixRun) sideBySide(ctx context.Context, lanes []*lane, fault faults.Fault) error {
	for {
		var open []*lane
		for _, l := range lanes {
			if l.open(mr.o) {
				open = append(open, l)
			}
		}
		if len(open) == 0 {
			return nil
		}
		byDefault := -1 // the lane whose buyers name none
		var safe []int
		for i, l := range open {
			if l.s.Safe {
				safe = append(safe, i)
			}
		}
		if len(safe) > 0 {
			byDefault = safe[mr.defaultTurn%len(safe)]
			mr.defaultTurn++
			fmt.Fprintf(mr.log, "  %s: %s sells as the fleet default this round, its buyers naming none\n", fault.Name(), open[byDefault].s.Name)
		}
		var board *strikeBoard
		spread := time.Duration(0) // a fault of its own strikes each run at its own moment
		began := time.Now()
		if faults.ScopeOf(fault) == faults.ScopeFleet {
			board = newStrikeBoard(len(open))
			go board.strike(ctx, fault, faults.Target{Fleet: mr.fleet, Strategies: mr.all, LockTTL: mr.o.lockTTL})
			spread = mr.spread
		}
		type outcome struct {
			res report.FaultRun
			err error
		}
		got := make([]outcome, len(open))
		var wg sync.WaitGroup
		for i, l := range open {
			product, size := mr.next(l, fault, 1)
			wg.Go(func() {
				var disturb func(context.Context, func() int64, <-chan struct{}) error
				if board != nil {
					defer board.leave(i)
					disturb = board.disturb(i, strikeAt(size))
				} else {
					own, _ := faults.New(fault.Name()) // a value per run: it keeps what it must heal
					disturb = strikeAlone(own, mr.target(l, product), strikeAt(size))
				}
				sc := load.Scenario{Name: l.s.Name, Safe: l.s.Safe, Sell: []string{l.s.Name}}
				soldWith := ""
				if i == byDefault {
					sc.Sell, sc.Switch, soldWith = nil, []string{l.s.Name}, l.s.Name
				}
				got[i].res, got[i].err = mr.faultedRun(ctx, l.s, size, product, sc, soldWith, spread, disturb)
			})
		}
		wg.Wait()
		if board != nil {
			<-board.done
			if !board.struckAt.IsZero() {
				delay := board.struckAt.Sub(began)
				mr.spread = max(mr.o.spread, 2*delay).Round(100 * time.Millisecond)
				fmt.Fprintf(mr.log, "  %s: struck %d runs after %v; next spread %v\n", fault.Name(), board.hit, delay.Round(100*time.Millisecond), mr.spread)
			}
		}
		for i, l := range open {
			if _, err := mr.record(l, fault, got[i].res, got[i].err); err != nil {
				return err
			}
		}
	}
}

// strikeAt is how many buyers of a run have their answer when its fault
// strikes: a fifth.
func strikeAt(o faultOptions) int64 { return int64(max(1, o.buyers/5)) }

// strikeAlone is a run's Disturb for a fault of its own: it strikes once
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
// default), starting over at least spread, while disturb strikes. The run is judged like any other
// (faulted), then its ledger is checked key by key, and the replicas'
// hold logs are searched for holders that overlapped.
func (mr *matrixRun) faultedRun(ctx context.Context, s load.StrategyInfo, o faultOptions, product string, sc load.Scenario, soldWith string,
	spread time.Duration, disturb func(context.Context, func() int64, <-chan struct{}) error) (report.FaultRun, error) {
	before, err := breachCounts(ctx, mr.replicas, s.Name)
	if err != nil {
		return report.FaultRun{}, err
	}
	cfg := load.Config{
		Product: product, Stock: o.stock, Buyers: o.buyers, Concurrency: o.concurrency,
		Keys: product, Retries: o.retries, Disturb: disturb, Spread: spread,
	}
	res, err := load.Run(ctx, mr.c, cfg, sc, nil)
	if err != nil {
		return report.FaultRun{}, err
	}
	pgURL := mr.fleet.PostgresURL
	byKey, err := verdict.ReadKeys(ctx, pgURL, product, res.Rounds[0].Round)
	if err != nil {
		return report.FaultRun{}, err
	}
	why := verdict.CheckKeys(byKey, res.Answers)
	if soldWith != "" {
		others, err := verdict.SoldWithOthers(ctx, pgURL, product, res.Rounds[0].Round, soldWith)
		if err != nil {
			return report.FaultRun{}, err
		}
		why = append(why, others...)
	}
	if len(why) > 0 {
		res.Reasons = append(res.Reasons, why...)
		if s.Safe {
			res.Verdict = verdict.Broken
		}
	}
	if s.Safe && res.Verdict == verdict.Broken {
		// Which strategy sold what, from which replica: the first clue.
		who, err := verdict.LedgerByStrategy(ctx, pgURL, product, res.Rounds[0].Round)
		if err != nil {
			return report.FaultRun{}, err
		}
		res.Reasons = append(res.Reasons, "ledger rows by strategy@replica: "+who)
	}
	after, err := breachCounts(ctx, mr.replicas, s.Name)
	if err != nil {
		return report.FaultRun{}, err
	}
	res.BreachMetric = breachDelta(before, after)
	run := report.FaultRun{Result: res}
	holds, err := fetchHolds(ctx, mr.replicas, mr.fleet.AdminToken, product)
	if err != nil {
		return report.FaultRun{}, err
	}
	ov := verdict.Overlaps(holds, time.Now())
	run.Overlaps = int64(len(ov))
	for _, o := range ov[:min(len(ov), 3)] {
		run.OverlapSample = append(run.OverlapSample, o.Describe())
	}
	return run, nil
}

// isTerminal reports whether w is a terminal (colour only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// fetchHolds reads every replica's holds of product (admin token). A
// replica that was killed during the run has lost the holds of its
// previous life: those are not seen.
func fetchHolds(ctx context.Context, urls []string, adminToken, product string) ([]verdict.Hold, error) {
	var all []verdict.Hold
	for _, u := range urls {
		got, err := apiclient.New(u, apiclient.Options{AdminToken: adminToken, HTTPClient: http.DefaultClient}).Holds(ctx, product)
		if err != nil {
			return nil, fmt.Errorf("holds of %s on %s: %w", product, u, err)
		}
		for _, h := range got.Holds {
			held := verdict.Hold{Strategy: h.Strategy, Fence: h.Fence, Start: h.Start, Instance: got.Instance}
			if !h.End.IsZero() {
				held.End = &h.End
			}
			if h.Outcome != "" {
				held.Outcome = &h.Outcome
			}
			all = append(all, held)
		}
	}
	return all, nil
}

// breachCounts scrapes inventory_lock_breaches_total{strategy} from every
// replica's /metrics and returns it by replica URL.
func breachCounts(ctx context.Context, urls []string, strategy string) (map[string]int64, error) {
	out := map[string]int64{}
	want := `inventory_lock_breaches_total{strategy="` + strategy + `"}`
	for _, u := range urls {
		metrics, err := apiclient.New(u, apiclient.Options{HTTPClient: http.DefaultClient}).Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", u, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(metrics))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), want+" "); ok {
				n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				out[u] = int64(n)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", u, err)
		}
	}
	return out, nil
}

// breachDelta is the breaches counted between two scrapes. A replica whose
// counter went down was restarted: all it counted since is new.
func breachDelta(before, after map[string]int64) int64 {
	var n int64
	for u, a := range after {
		if b := before[u]; a >= b {
			n += a - b
		} else {
			n += a
		}
	}
	return n
}
