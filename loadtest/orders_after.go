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

// runOrdersAfter runs row, the --orders-after row, with the order scenario
// of the flags, its buyers paced over ordersSpread. (It once had at most 8
// buyers at a time and 400 in all, because porcupine took 87 s on its
// history at 16; internal/history's own search now checks the 1,500
// buyers' 1,974 ops of make demo DEMO_ARGS='--stock 1000 --buyers 1500'
// in 0.3 s.)
func runOrdersAfter(ctx context.Context, c *load.Client, cfg load.Config, row load.Scenario, o options, rep *report.Report, stderr io.Writer) ([]load.Result, error) {
	cfg.Orders = o.orderScenario()
	cfg.Spread = ordersSpread(o.payWithin)
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
