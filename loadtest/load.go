package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// loadConfig is what every strategy run shares.
type loadConfig struct {
	Product     string
	Stock       int64
	Buyers      int
	Concurrency int
}

// Result is one strategy run, as printed in the table and written by --json.
type Result struct {
	Run         int              `json:"run"`
	Strategy    string           `json:"strategy"`
	Round       int64            `json:"round"` // the product's ledger round this run sold in
	Safe        bool             `json:"safe"`
	Initial     int64            `json:"initial"`
	Buyers      int64            `json:"buyers"`
	OK          int64            `json:"ok_2xx"`
	SoldOut     int64            `json:"sold_out_409"`
	Unavailable int64            `json:"unavailable_503"`
	Errors      int64            `json:"errors"`
	FinalStock  int64            `json:"final_stock"`
	LedgerUnits int64            `json:"ledger_units"`
	LedgerRows  int64            `json:"ledger_rows"`
	Oversold    int64            `json:"oversold"`
	LostUpdates int64            `json:"lost_updates"`
	Undersold   int64            `json:"undersold"`
	Seconds     float64          `json:"seconds"`
	Throughput  float64          `json:"throughput_rps"`
	LatencyMs   Latency          `json:"latency_ms"`
	PerReplica  map[string]int64 `json:"per_replica"`
	Verdict     string           `json:"verdict"`
	Reasons     []string         `json:"reasons,omitempty"`
	FirstErrors []string         `json:"first_errors,omitempty"`
}

// Latency holds request latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// tally is what the buyers of one run saw; workers add to it concurrently.
type tally struct {
	ok, soldOut, unavailable, errors atomic.Int64

	mu         sync.Mutex
	perReplica map[string]int64
	firstErrs  []string
	hist       *hdrhistogram.Histogram // microseconds
}

func (t *tally) add(o outcome, perReplica map[string]int64, hist *hdrhistogram.Histogram) {
	switch {
	case o.err != nil:
		t.errors.Add(1)
		t.mu.Lock()
		if len(t.firstErrs) < 5 {
			t.firstErrs = append(t.firstErrs, o.err.Error())
		}
		t.mu.Unlock()
	case o.status/100 == 2:
		t.ok.Add(1)
	case o.status == 409:
		t.soldOut.Add(1)
	case o.status == 503:
		t.unavailable.Add(1)
	}
	if o.status != 0 {
		name := o.instance
		if name == "" {
			name = "(no X-Instance)"
		}
		perReplica[name]++
	}
}

// runStrategy restocks the product, fires cfg.Buyers buyers for one unit
// each through cfg.Concurrency workers, and reads the product back.
// progress, when not nil, is called once per finished buyer.
func runStrategy(ctx context.Context, c *client, cfg loadConfig, s strategyInfo, progress func()) (Result, error) {
	if err := c.restock(ctx, cfg.Product, cfg.Stock); err != nil {
		return Result{}, err
	}
	before, err := c.product(ctx, cfg.Product)
	if err != nil {
		return Result{}, fmt.Errorf("after restock: %w", err)
	}
	if before.Quantity != cfg.Stock || before.Sales != 0 {
		return Result{}, fmt.Errorf("after restocking %s to %d: quantity %d, %d sales in round %d; want %d and 0",
			cfg.Product, cfg.Stock, before.Quantity, before.Sales, before.Round, cfg.Stock)
	}

	body, _ := json.Marshal(map[string]any{"product_id": cfg.Product, "quantity": 1})
	t := &tally{perReplica: map[string]int64{}, hist: newHistogram()}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(cfg.Concurrency, cfg.Buyers) {
		wg.Go(func() {
			hist, per := newHistogram(), map[string]int64{}
			for next.Add(1) <= int64(cfg.Buyers) && ctx.Err() == nil {
				t0 := time.Now()
				o := c.buy(ctx, body, s.Name)
				_ = hist.RecordValue(time.Since(t0).Microseconds()) // above the 60 s ceiling cannot happen: the client times out first
				t.add(o, per, hist)
				if progress != nil {
					progress()
				}
			}
			t.mu.Lock()
			t.hist.Merge(hist)
			for k, v := range per {
				t.perReplica[k] += v
			}
			t.mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("interrupted: %w", err)
	}

	after, err := c.product(ctx, cfg.Product)
	if err != nil {
		return Result{}, fmt.Errorf("final state: %w", err)
	}
	if after.Round != before.Round {
		return Result{}, fmt.Errorf("final state: round changed from %d to %d during the run (someone else restocked %s)", before.Round, after.Round, cfg.Product)
	}
	f := figures{
		Safe:        s.Safe,
		Initial:     before.Initial,
		Buyers:      int64(cfg.Buyers),
		OK:          t.ok.Load(),
		SoldOut:     t.soldOut.Load(),
		Unavailable: t.unavailable.Load(),
		Errors:      t.errors.Load(),
		Final:       after.Quantity,
		LedgerUnits: after.Sold,
		LedgerRows:  after.Sales,
	}
	j := judge(f)
	return Result{
		Strategy:    s.Name,
		Round:       after.Round,
		Safe:        s.Safe,
		Initial:     f.Initial,
		Buyers:      f.Buyers,
		OK:          f.OK,
		SoldOut:     f.SoldOut,
		Unavailable: f.Unavailable,
		Errors:      f.Errors,
		FinalStock:  f.Final,
		LedgerUnits: f.LedgerUnits,
		LedgerRows:  f.LedgerRows,
		Oversold:    j.Oversold,
		LostUpdates: j.LostUpdates,
		Undersold:   j.Undersold,
		Seconds:     elapsed.Seconds(),
		Throughput:  float64(cfg.Buyers) / elapsed.Seconds(),
		LatencyMs: Latency{
			P50: ms(t.hist.ValueAtQuantile(50)),
			P95: ms(t.hist.ValueAtQuantile(95)),
			P99: ms(t.hist.ValueAtQuantile(99)),
			Max: ms(t.hist.Max()),
		},
		PerReplica:  t.perReplica,
		Verdict:     j.Verdict,
		Reasons:     j.Reasons,
		FirstErrors: t.firstErrs,
	}, nil
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, (60 * time.Second).Microseconds(), 3)
}

func ms(us int64) float64 { return float64(us) / 1000 }

// replicaNames returns the keys of per in order.
func replicaNames(per map[string]int64) []string {
	names := make([]string, 0, len(per))
	for k := range per {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
