package load

import (
	"context"
	"fmt"
	"time"
)

// TableOptions say how RunTable runs its rows.
type TableOptions struct {
	// Runs is how many times every row is run (at least once).
	Runs int
	// Ceilings measures, for CeilingTime each and just before each run,
	// the hot row (HotRowRate, when PostgresURL is set) and a one-strategy
	// row's serial ceiling (SerialRate); and after a one-strategy row that
	// ended at exactly 0, its sold-out phase (SoldOutPhase).
	Ceilings    bool
	CeilingTime time.Duration
	PostgresURL string
	// Progress, when set, is told of each run as it starts and ends.
	Progress Progress
}

// Progress follows RunTable's runs.
type Progress interface {
	// Start is called as a row's run begins; the func it returns (nil for
	// none) is called once per buyer answered.
	Start(row string, run int) func()
	// Done is called as the run's buyers are done: with its result, or
	// the error that ended it.
	Done(row string, run int, res Result, err error)
}

// RunTable runs every row of rows with cfg, o.Runs times (the rows of one
// run facing the same demand: cfg.Seed is the run's number), and returns
// their results in order, or the first error.
func RunTable(ctx context.Context, c *Client, cfg Config, rows []Scenario, o TableOptions) ([]Result, error) {
	var out []Result
	for runNo := 1; runNo <= o.Runs; runNo++ {
		// Every row of a run faces the same demand; each run another.
		cfg.Seed = uint64(runNo)
		for _, s := range rows {
			var progress func()
			if o.Progress != nil {
				progress = o.Progress.Start(s.Name, runNo)
			}
			// The ceilings a run is compared with are measured beside it, not
			// once for all runs: the machine drifts between them (checkpoints,
			// caches, a ledger hundreds of thousands of rows longer).
			var hotRow, serial float64
			var err error
			if o.Ceilings && o.PostgresURL != "" {
				if hotRow, err = HotRowRate(ctx, c, o.PostgresURL, o.CeilingTime); err != nil {
					return nil, fmt.Errorf("%s: hot-row ceiling: %w", s.Name, err)
				}
			}
			if o.Ceilings && len(s.Sell) == 1 {
				if serial, err = SerialRate(ctx, c, s.Sell[0], o.CeilingTime); err != nil {
					return nil, fmt.Errorf("%s: serial ceiling: %w", s.Name, err)
				}
			}
			res, err := Run(ctx, c, cfg, s, progress)
			if err == nil {
				res.Run = runNo
				res.HotRowRate, res.SerialRate = hotRow, serial
			}
			if o.Progress != nil {
				o.Progress.Done(s.Name, runNo, res, err)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name, err)
			}
			// Before the next row's restock starts a round no circuit covers.
			if o.PostgresURL != "" && len(res.Products) == 0 {
				if res.Circuit, err = awaitCircuit(ctx, o.PostgresURL, cfg.Product, res); err != nil {
					return nil, fmt.Errorf("%s: %w", s.Name, err)
				}
			}
			// With several products, the sold-out phase is product 1's, the hottest.
			soldOutProduct, final := cfg.Product, res.FinalStock
			if len(res.Products) > 0 {
				soldOutProduct, final = res.Products[0].Product, res.Products[0].FinalStock
			}
			if o.Ceilings && len(s.Sell) == 1 && final == 0 {
				// The crowd that arrives after the last unit.
				if res.SoldOutRate, res.SoldOutHealthz, err = SoldOutPhase(ctx, c, soldOutProduct, s.Sell[0], cfg.Concurrency, o.CeilingTime); err != nil {
					return nil, fmt.Errorf("%s: sold-out phase: %w", s.Name, err)
				}
			}
			out = append(out, res)
		}
	}
	return out, nil
}
