package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"inventory/internal/faults"
	"inventory/internal/faults/matrix"
	"inventory/internal/history"
	"inventory/internal/load"
	"inventory/internal/report"
)

// faultOptions are the flags of `loadtest faults`.
type faultOptions struct {
	matrix.Options
	faults, jsonOut, htmlOut string
	// orders and payWithin: the orders mode (matrix.Options.Orders).
	orders    bool
	payWithin time.Duration
}

func parseFaultFlags(args []string, stderr io.Writer) (faultOptions, error) {
	o := faultOptions{Options: matrix.Defaults()}
	fs := flag.NewFlagSet("loadtest faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage:\n  loadtest faults [flags]  run the fault matrix: every strategy × fault, on local fleets\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Strategies, "strategies", "", "comma-separated strategies (default: every one the fleet offers)")
	fs.StringVar(&o.faults, "faults", "", "comma-separated faults (default: all of "+strings.Join(faults.Names(), ", ")+"); pg-failover-async, named alone, demonstrates the sales an asynchronous standby loses")
	fs.IntVar(&o.Runs, "runs", o.Runs, "faulted runs per cell (strategy × fault)")
	fs.Int64Var(&o.Stock, "stock", o.Stock, "units in stock at the start of each run")
	fs.IntVar(&o.Buyers, "buyers", o.Buyers, "buyers per run, each buying one unit")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "buyers in flight at once")
	fs.IntVar(&o.Retries, "retries", o.Retries, "how often a buyer without a definite answer retries with the same Idempotency-Key")
	fs.DurationVar(&o.WorkDelay, "work-delay", o.WorkDelay, "INVENTORY_WORK_DELAY for the replicas (keeps buyers inside their critical sections)")
	fs.DurationVar(&o.LockTTL, "lock-ttl", o.LockTTL, "INVENTORY_LOCK_TTL for the replicas; replica-pause pauses for twice this")
	fs.DurationVar(&o.Spread, "spread", o.Spread, "side by side, each run's buyers start over at least this long, so the fastest strategies are still selling when the slowest reach the fault's moment (0: as fast as they can)")
	fs.IntVar(&o.Fleets, "fleets", o.Fleets, "how many fleets run at once, each with its own group of faults (the Sentinel's, the Redis Cluster's, Patroni's and libfaketime's faults need fleets of their own); more is shorter, but the fleets share the machine's cores")
	fs.BoolVar(&o.orders, "orders", false, "orders mode: each run's buyers hold units for an order and abandon, cancel, pay at the deadline, pay, are refunded or shipped (the expiry job returns the abandoned units, mid-fault), and every invariant of an order's life is read from Postgres into each run's verdict; a hold carries its buyer's Idempotency-Key and is retried as a sale is, so that an answer a fault lost is settled from the ledger and the history is checked")
	fs.DurationVar(&o.payWithin, "pay-within", matrix.DefaultOrders().PayWithin, "with --orders, each hold's pay_within (1s to 24h)")
	fs.DurationVar(&o.SweepInterval, "sweep-interval", 0, "INVENTORY_ORDER_SWEEP_INTERVAL for the replicas (0: the service's default, 1s); with --orders, an expiry later than its deadline + this + the lock TTL + 1 s breaks the run")
	fs.StringVar(&o.LogDir, "log-dir", "", "keep each fleet's processes' output (replicas, Postgres, nginx, …) in a directory of its own under this one, named after its faults (default: kept in memory only)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the matrix as JSON to this file, or - for stdout (the table then goes to stderr)")
	fs.StringVar(&o.htmlOut, "html", "", "also write the matrix as a self-contained HTML heat map to this file")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.Runs < 1, o.Stock < 1, o.Buyers < 1, o.Concurrency < 1, o.Fleets < 1:
		return o, fmt.Errorf("%w: --runs, --stock, --buyers, --concurrency and --fleets must be at least 1", errUsage)
	case o.Retries < 1:
		return o, fmt.Errorf("%w: --retries must be at least 1 (buyers retry a 503 with the same key at least once)", errUsage)
	case o.LockTTL <= 0 || o.WorkDelay < 0 || o.Spread < 0 || o.SweepInterval < 0:
		return o, fmt.Errorf("%w: --lock-ttl must be positive, --work-delay, --spread and --sweep-interval not negative", errUsage)
	}
	if o.orders {
		s := matrix.DefaultOrders()
		s.PayWithin = o.payWithin
		s.SweepBound = load.SweepBound(o.LockTTL, cmp.Or(o.SweepInterval, matrix.DefaultSweepInterval))
		if err := s.Validate(); err != nil {
			return o, fmt.Errorf("%w: --orders: %w", errUsage, err)
		}
		o.Orders = &s
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
		f, ok := faults.New(name) // a demonstration (pg-failover-async) only when named
		if !ok {
			return nil, fmt.Errorf("%w: unknown fault %q (want one of %s, or the demonstration pg-failover-async)", errUsage, name, strings.Join(faults.Names(), ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// runFaults is `loadtest faults`: it runs every strategy × fault o.runs
// times on local fleets (matrix.Run), then prints the matrix.
func runFaults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFaultFlags(args, stderr)
	if err != nil {
		return err
	}
	fl, err := pickFaults(o.faults)
	if err != nil {
		return err
	}
	m, err := matrix.Run(ctx, o.Options, fl, stderr)
	if err != nil {
		return err
	}
	if err := writeMatrixHistoryPages(&m, o.htmlOut, o.jsonOut, stderr); err != nil {
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
		return matrixFailure(m)
	}
	return nil
}

// errMatrixFailed is what a failed matrix's error wraps.
var errMatrixFailed = errors.New("the fault matrix failed")

// matrixFailure says why m failed: which safe strategies broke an
// invariant under which fault, and which cells the fault did not strike.
func matrixFailure(m report.Matrix) error {
	broke, notStruck := m.Failures()
	var parts []string
	if len(broke) > 0 {
		parts = append(parts, fmt.Sprintf("a safe strategy broke an invariant under a fault in %d cell%s (%s; see BROKE above)",
			len(broke), plural(len(broke), "", "s"), strings.Join(broke, ", ")))
	}
	if len(notStruck) > 0 {
		what := "no safe strategy broke an invariant, but "
		if len(broke) > 0 {
			what = ""
		}
		parts = append(parts, fmt.Sprintf("%sthe fault did not strike in %d cell%s, which proved nothing (%s; see %s above)",
			what, len(notStruck), plural(len(notStruck), "", "s"), strings.Join(notStruck, ", "), report.NotStruck))
	}
	if len(parts) == 0 { // Failed set by hand: say so rather than nothing
		return errMatrixFailed
	}
	return fmt.Errorf("%w: %s", errMatrixFailed, strings.Join(parts, "; and "))
}

// writeMatrixHistoryPages writes porcupine's page of every faulted run's
// product whose history was NOT LINEARIZABLE beside --html or --json (else
// in a new temporary directory) and prints each path.
func writeMatrixHistoryPages(m *report.Matrix, htmlOut, jsonOut string, stderr io.Writer) error {
	failed := false
	for _, c := range m.Cells {
		for _, r := range c.Results {
			failed = failed || r.History != nil && r.History.Verdict == string(history.NotLinearizable)
		}
	}
	if !failed {
		return nil
	}
	dir := ""
	if htmlOut == "" && (jsonOut == "" || jsonOut == "-") {
		var err error
		if dir, err = os.MkdirTemp("", "loadtest-history-"); err != nil {
			return err
		}
	}
	paths, err := report.WriteMatrixHistoryPages(report.HistoryBase(htmlOut, jsonOut, dir), m)
	for _, p := range paths {
		fmt.Fprintf(stderr, "history not linearizable, visualized: %s\n", report.AbsPath(p))
	}
	return err
}

// isTerminal reports whether w is a terminal (colour only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
