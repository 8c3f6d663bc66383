package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"inventory/internal/faults"
	"inventory/internal/fleet"
)

// faultOptions are the flags of `loadtest faults`.
type faultOptions struct {
	strategies, faults, jsonOut string
	htmlOut                     string
	runs, buyers, concurrency   int
	stock                       int64
	workDelay, lockTTL          time.Duration
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
	case o.lockTTL <= 0 || o.workDelay < 0:
		return o, fmt.Errorf("%w: --lock-ttl must be positive and --work-delay not negative", errUsage)
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

// runFaults is `loadtest faults`: it starts a local fleet and runs every
// strategy × fault o.runs times, then prints the matrix.
func runFaults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFaultFlags(args, stderr)
	if err != nil {
		return err
	}
	fl, err := pickFaults(o.faults)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "starting a local fleet: Postgres (durable), Redis, 2 replicas (INVENTORY_WORK_DELAY=%s, INVENTORY_LOCK_TTL=%s), nginx …\n", o.workDelay, o.lockTTL)
	f, err := fleet.Start(ctx, fleet.Options{
		Replicas: 2,
		// Each replica reaches Postgres and Redis through links of its own,
		// which net-latency and net-partition act on.
		NetLinks: true,
		// A Redis replica, for redis-failover to promote.
		RedisReplica: true,
		// Durable: an immediate Postgres restart must not lose what it acknowledged.
		Env: map[string]string{"INVENTORY_WORK_DELAY": o.workDelay.String(), "INVENTORY_LOCK_TTL": o.lockTTL.String()},
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stderr, "stopping the local fleet …")
		if err := f.Stop(); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
		}
	}()
	m, err := faultMatrix(ctx, f, o, fl, stderr)
	if err != nil {
		return err
	}
	tableOut := stdout
	if o.jsonOut == "-" {
		tableOut = stderr
	}
	printMatrix(tableOut, m, isTerminal(tableOut))
	if o.jsonOut != "" {
		if err := writeReport(o.jsonOut, stdout, m); err != nil {
			return err
		}
	}
	if o.htmlOut != "" {
		if err := writeHTML(o.htmlOut, nil, &m); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: %s\n", absPath(o.htmlOut))
	}
	if m.Failed {
		return errSafeBroke
	}
	return nil
}

// errSafeBroke is returned after the matrix is printed when a safe strategy broke an invariant under a fault.
var errSafeBroke = errors.New("a safe strategy broke an invariant under a fault (see the red cells above)")

// faultMatrix runs every strategy the fleet offers (or o.strategies) ×
// every fault of fl, o.runs faulted runs per cell, against f.
func faultMatrix(ctx context.Context, f *fleet.Fleet, o faultOptions, fl []faults.Fault, log io.Writer) (Matrix, error) {
	c := newClient(f.URL, f.AdminToken, o.concurrency)
	defer c.close()
	strategies, err := pickStrategies(ctx, c, o.strategies, log)
	if err != nil {
		return Matrix{}, err
	}
	var all []faults.Strategy
	for _, s := range strategies {
		all = append(all, faults.Strategy{Name: s.Name, Safe: s.Safe})
	}
	var urls []string
	for _, r := range f.Replicas {
		urls = append(urls, r.URL)
	}
	m := Matrix{
		StartedAt: time.Now().UTC().Format(time.RFC3339), Runs: o.runs, Stock: o.stock, Buyers: o.buyers,
		Concurrency: o.concurrency, Retries: o.retries, WorkDelay: o.workDelay.String(), LockTTL: o.lockTTL.String(),
	}
	for _, s := range strategies {
		m.Strategies = append(m.Strategies, StrategyInfo{Name: s.Name, Safe: s.Safe})
	}
	for _, x := range fl {
		m.Faults = append(m.Faults, x.Name())
	}
	stamp := time.Now().Unix() % 1_000_000
	for _, s := range strategies {
		for _, fault := range fl {
			cell := Cell{Strategy: s.Name, Fault: fault.Name(), Safe: s.Safe}
			// A missed run (the buyers all answered before the fault's moment,
			// which happens to the fastest strategies) is tried again, twice at
			// most, each time with four times the stock and buyers, so that
			// sales are still in flight when the fault strikes.
			ro := o
			for run := 1; cell.Runs < o.runs && run <= o.runs+2; run++ {
				product := fmt.Sprintf("f%d-%s-%s-%d", stamp, s.Name, fault.Name(), run)
				t := faults.Target{Fleet: f, Product: product, Strategy: s.Name, Strategies: all, LockTTL: o.lockTTL}
				res, err := faultedRun(ctx, c, ro, f.PostgresURL, urls, s, fault, t)
				switch {
				case errors.Is(err, faults.ErrNotApplicable):
					cell.NotApplicable = err.Error()
				case errors.Is(err, faults.ErrMissed):
					cell.Missed++
					ro.stock, ro.buyers = 4*ro.stock, 4*ro.buyers
				case err != nil:
					return Matrix{}, fmt.Errorf("%s × %s run %d: %w", s.Name, fault.Name(), run, err)
				default:
					res.Run = run
					cell.add(res)
				}
				if cell.NotApplicable != "" {
					break // the strategy has nothing this fault acts on
				}
			}
			cell.finish()
			fmt.Fprintf(log, "%-10s × %-18s %s\n", s.Name, fault.Name(), cell.Summary())
			m.Cells = append(m.Cells, cell)
			m.Failed = m.Failed || cell.SafeBroke
		}
	}
	return m, nil
}

// faultedRun is one run of one cell: buyers with Idempotency-Keys buy
// product with strategy s (the fleet default), and fault strikes once a
// fifth of them have their answer and a sale is inside its critical
// section. The run is judged like any other (faulted), then its ledger is
// checked key by key.
func faultedRun(ctx context.Context, c *client, o faultOptions, pgURL string, replicas []string, s strategyInfo, fault faults.Fault, t faults.Target) (Result, error) {
	before, err := breachCounts(ctx, replicas, s.Name)
	if err != nil {
		return Result{}, err
	}
	strikeAt := int64(max(1, o.buyers/5))
	cfg := loadConfig{
		Product: t.Product, Stock: o.stock, Buyers: o.buyers, Concurrency: o.concurrency,
		Keys: t.Product, Retries: o.retries,
		Disturb: func(ctx context.Context, answered func() int64, selling <-chan struct{}) error {
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for answered() < strikeAt {
				select {
				case <-selling:
					return faults.ErrMissed
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
				}
			}
			t.Selling = selling
			slog.Debug("fault strikes", "strategy", s.Name, "fault", fault.Name(), "product", t.Product, "answered", answered())
			injectErr := fault.Inject(ctx, t)
			// Heal even a half-done injection, then report the first error.
			return errors.Join(injectErr, fault.Heal(context.WithoutCancel(ctx)))
		},
	}
	// Buyers name no strategy: the fleet default is set to s for the run
	// (and restored after), so strategy-switch acts as it would in production.
	sc := scenario{Name: s.Name, Safe: s.Safe, Switch: []string{s.Name}}
	res, err := runScenario(ctx, c, cfg, sc, nil)
	if err != nil {
		return Result{}, err
	}
	why, err := checkKeys(ctx, pgURL, t.Product, res.Rounds[0].Round, res.answers)
	if err != nil {
		return Result{}, err
	}
	if len(why) > 0 {
		res.Reasons = append(res.Reasons, why...)
		if s.Safe {
			res.Verdict = VerdictBroken
		}
	}
	if s.Safe && res.Verdict == VerdictBroken {
		// Which strategy sold what, from which replica: the first clue.
		who, err := ledgerByStrategy(ctx, pgURL, t.Product, res.Rounds[0].Round)
		if err != nil {
			return Result{}, err
		}
		res.Reasons = append(res.Reasons, "ledger rows by strategy@replica: "+who)
	}
	after, err := breachCounts(ctx, replicas, s.Name)
	if err != nil {
		return Result{}, err
	}
	res.BreachMetric = breachDelta(before, after)
	return res, nil
}

// isTerminal reports whether w is a terminal (colour only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
