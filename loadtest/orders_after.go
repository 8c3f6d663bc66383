package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"inventory/internal/load"
	"inventory/internal/report"
)

// ordersAfterRow is the row --orders-after asks for, nil without it: its
// strategy is looked up before any row runs, so that a name the fleet does
// not offer fails at once.
func ordersAfterRow(ctx context.Context, c *load.Client, o options, stderr io.Writer) (*load.Scenario, error) {
	if o.ordersAfter == "" {
		return nil, nil
	}
	picked, err := load.PickStrategies(ctx, c, o.ordersAfter, stderr)
	if err != nil {
		return nil, fmt.Errorf("--orders-after: %w", err)
	}
	if len(picked) != 1 {
		return nil, fmt.Errorf("%w: --orders-after takes one strategy, got %q", errUsage, o.ordersAfter)
	}
	s := load.Single(picked[0])
	s.Name += "+orders"
	return &s, nil
}

// ordersSpread is how long the buyers of the --orders-after row take to
// start: three deadlines, so that the crowd is still buying when the units
// of the first abandoned carts come back (a deadline and a sweep after
// their hold), as internal/load's TestOrderScenarioIsSafe paces its buyers.
func ordersSpread(payWithin time.Duration) time.Duration { return 3 * payWithin }

// ordersConcurrency is the most buyers of the --orders-after row in
// flight at once. Its history has returns racing buyers for the last
// units, which the linearizability check pays for steeply as more ops
// overlap: measured on the 2-core box (400 buyers, 250 units, half of
// them holding), 16 at a time took 87 s to check, 8 at a time 1.3 s
// (the fault matrix's orders mode keeps 8 for the same reason).
const ordersConcurrency = 8

// ordersBuyers is the most buyers of the --orders-after row, for the same
// reason: its history's check grows steeply with its length too. Measured
// on the 2-core box under other work (load average 8-18): 400 buyers (about
// 500 ops) checked in 1.3 s; 1,500 buyers (1,971 ops) were INCONCLUSIVE
// after their budget of 12 s.
const ordersBuyers = 400

// ordersSize is the --orders-after row's buyers and stock: the rows' own,
// or, with more than ordersBuyers buyers, ordersBuyers and the stock scaled
// with them (so that as many buyers come per unit as in the other rows).
func ordersSize(buyers int, stock int64) (int, int64) {
	if buyers <= ordersBuyers {
		return buyers, stock
	}
	return ordersBuyers, max(1, (stock*ordersBuyers+int64(buyers)/2)/int64(buyers))
}

// runOrdersAfter runs row, the --orders-after row, with the order scenario
// of the flags, its buyers paced over ordersSpread, at most
// ordersConcurrency at a time and ordersBuyers in all.
func runOrdersAfter(ctx context.Context, c *load.Client, cfg load.Config, row load.Scenario, o options, rep *report.Report, stderr io.Writer) ([]load.Result, error) {
	cfg.Orders = o.orderScenario()
	cfg.Spread = ordersSpread(o.payWithin)
	cfg.Concurrency = min(cfg.Concurrency, ordersConcurrency)
	cfg.Buyers, cfg.Stock = ordersSize(cfg.Buyers, cfg.Stock)
	rep.OrdersAfter = row.Name + ": " + ordersSetup(cfg, o)
	fmt.Fprintln(stderr, rep.OrdersAfter)
	return load.RunTable(ctx, c, cfg, []load.Scenario{row}, load.TableOptions{
		Runs: o.runs, PostgresURL: o.postgresURL, Progress: &bars{w: stderr, buyers: cfg.Buyers},
	})
}

// ordersSetup says how the --orders-after row runs: the terminal prints
// it before the row, the HTML report among its settings.
func ordersSetup(cfg load.Config, o options) string {
	return fmt.Sprintf("%d buyers for %d units, started over %s, %d at a time; %.0f%% of them hold for %s: %.0f%% of those abandon their cart, "+
		"%.0f%% cancel, %.0f%% pay at the deadline, the rest pay; expiries due within %s of their deadline",
		cfg.Buyers, cfg.Stock, cfg.Spread, cfg.Concurrency, 100*o.hold, o.payWithin, 100*o.abandon, 100*o.cancel, 100*o.payAtDeadline, o.sweepBound)
}
