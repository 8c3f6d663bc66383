package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	apiclient "inventory/internal/client"
)

// Ceilings are what the strategies are compared against, measured in the
// same run on the same machine (--ceilings): the hot-row rate is the one a
// one-sale-per-transaction strategy cannot beat, /healthz the rate the fleet
// answers at all.
type Ceilings struct {
	// HotRow is one-sale transactions per second on one stock row, straight
	// to Postgres like pgbench: UPDATE … WHERE quantity >= 1 and a ledger
	// INSERT per transaction, from HotRowClients connections, measured at
	// the start; each run is compared with its own, measured just before it
	// (Result.HotRowRate). 0: not measured (no Postgres URL).
	HotRow        float64 `json:"hot_row_tps"`
	HotRowClients int     `json:"hot_row_clients"`
	// Redis is PING round trips per second from the run's concurrency.
	Redis float64 `json:"redis_round_trips_per_s"`
	// Healthz is GET /healthz answers per second through the target at the
	// run's concurrency.
	Healthz float64 `json:"healthz_per_s"`
	// Serial is each strategy's own serial ceiling, the median of the
	// figures measured before each of its runs (Result.SerialRate): sales
	// per second by one buyer at a time through the API (see serialRate):
	// for a lock strategy its lock round trips, read, write and commit
	// back to back, and one HTTP round trip.
	Serial  map[string]float64 `json:"serial_sales_per_s,omitempty"`
	Seconds float64            `json:"seconds_each"`
}

// hotRowClients is pgbench's client count in the reference figure.
const hotRowClients = 8

// measureCeilings measures each ceiling the strategies share for d;
// pgURL and redisURL may be empty, which skips that ceiling. (Each
// strategy's serial ceiling is measured beside its runs: serialRate.)
func measureCeilings(ctx context.Context, c *client, pgURL, redisURL string, concurrency int, d time.Duration) (Ceilings, error) {
	out := Ceilings{Seconds: d.Seconds(), HotRowClients: hotRowClients}
	if pgURL != "" {
		tps, err := hotRowRate(ctx, c, pgURL, d)
		if err != nil {
			return out, fmt.Errorf("hot-row ceiling: %w", err)
		}
		out.HotRow = tps
	}
	if redisURL != "" {
		rps, err := redisRate(ctx, redisURL, concurrency, d)
		if err != nil {
			return out, fmt.Errorf("redis ceiling: %w", err)
		}
		out.Redis = rps
	}
	rps, err := rate(ctx, concurrency, d, func(ctx context.Context) error {
		return c.healthz(ctx)
	})
	if err != nil {
		return out, fmt.Errorf("healthz ceiling: %w", err)
	}
	out.Healthz = rps
	return out, nil
}

// hotRowRate sells one unit per transaction of a product of its own,
// restocked through the API so that its ledger stays consistent.
func hotRowRate(ctx context.Context, c *client, pgURL string, d time.Duration) (float64, error) {
	const id = "ceiling-hot-row"
	if _, err := c.restock(ctx, id, 1_000_000_000); err != nil {
		return 0, err
	}
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return 0, err
	}
	cfg.MaxConns = hotRowClients
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return rate(ctx, hotRowClients, d, func(ctx context.Context) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		var round int
		if err := tx.QueryRow(ctx, `
			UPDATE stock SET quantity = quantity - 1, version = version + 1
			WHERE product_id = $1 AND quantity >= 1 RETURNING round`, id).Scan(&round); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO sales (product_id, round, quantity, strategy, instance, sale_key)
			VALUES ($1, $2, 1, 'ceiling', 'loadtest', $3)`, id, round, uuid.NewString()); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// serialRate sells a product of its own by strategy name through the API,
// one buyer at a time: the strategy's serial ceiling as a client sees it,
// its lock's and its sale's round trips back to back, plus one HTTP round
// trip through nginx. 0 and no error when the fleet offers the strategy
// without its lock service (503 strategy-unavailable).
func serialRate(ctx context.Context, c *client, name string, d time.Duration) (float64, error) {
	id := "ceiling-serial-" + name
	if _, err := c.restock(ctx, id, 1_000_000_000); err != nil {
		return 0, err
	}
	o := c.buy(ctx, id, name, "")
	var p *apiclient.Problem
	if errors.As(o.err, &p) && p.Slug() == "strategy-unavailable" {
		return 0, nil
	}
	return rate(ctx, 1, d, func(ctx context.Context) error {
		o := c.buy(ctx, id, name, "")
		if o.status/100 != 2 {
			return fmt.Errorf("a serial sale with %s: %d: %w", name, o.status, o.err)
		}
		return nil
	})
}

func redisRate(ctx context.Context, redisURL string, concurrency int, d time.Duration) (float64, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return 0, err
	}
	opts.PoolSize = concurrency
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	return rate(ctx, concurrency, d, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
}

// rate runs op from workers goroutines for d and returns the successful
// operations per second; the first error ends the measurement.
func rate(ctx context.Context, workers int, d time.Duration, op func(context.Context) error) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := op(ctx); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// soldOutSlice is how long the sold-out phase measures one side before
// it turns to the other: alternating sold-out buyers and GET /healthz
// every second or so, a drift of the machine (a checkpoint, another
// process) weighs on both figures alike.
const soldOutSlice = time.Second

// soldOutPhase measures, for d each, the 409s per second that buyers of the
// sold-out product get with strategy and the GET /healthz answers per
// second, in alternating slices (at least two of each).
func soldOutPhase(ctx context.Context, c *client, product, strategy string, concurrency int, d time.Duration) (soldOut, healthz float64, err error) {
	slices := max(2, int(d/soldOutSlice))
	slice := d / time.Duration(slices)
	for range slices {
		so, err := soldOutRate(ctx, c, product, strategy, concurrency, slice)
		if err != nil {
			return 0, 0, err
		}
		hz, err := rate(ctx, concurrency, slice, c.healthz)
		if err != nil {
			return 0, 0, fmt.Errorf("healthz beside the sold-out phase: %w", err)
		}
		soldOut += so / float64(slices)
		healthz += hz / float64(slices)
	}
	return soldOut, healthz, nil
}

// soldOutRate asks n buyers, concurrency at a time, for one unit of a
// product that is sold out, with strategy, and returns the 409s per
// second; any other answer is an error.
func soldOutRate(ctx context.Context, c *client, product, strategy string, concurrency int, d time.Duration) (float64, error) {
	return rate(ctx, concurrency, d, func(ctx context.Context) error {
		o := c.buy(ctx, product, strategy, "")
		if o.err != nil {
			return o.err
		}
		if o.status != http.StatusConflict {
			return fmt.Errorf("a buyer of sold-out %q got %d, want 409", product, o.status)
		}
		return nil
	})
}

// printCeilings writes the ceilings and, per one-strategy row, its sales per
// second as a multiple of the hot-row rate and as a share of its serial
// ceiling, and its sold-out answers as a share of /healthz; with several
// runs, each strategy's medians too. Nothing without --ceilings.
func printCeilings(w io.Writer, r Report) {
	c := r.Ceilings
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nceilings, measured in this run for %.0fs each, at the start: ", c.Seconds)
	if c.HotRow > 0 {
		fmt.Fprintf(w, "hot row %.0f one-sale transactions/s (%d clients, straight to Postgres) · ", c.HotRow, c.HotRowClients)
	}
	if c.Redis > 0 {
		fmt.Fprintf(w, "Redis %.0f round trips/s · ", c.Redis)
	}
	fmt.Fprintf(w, "GET /healthz %.0f/s through the target; and just before each run, the hot row again and the strategy's serial ceiling\n", c.Healthz)
	header := fmt.Sprintf("%-10s %4s %9s %9s %10s %9s %9s %14s %12s\n", "strategy", "run", "sales/s", "hot row/s", "× hot row", "serial/s", "% serial", "sold-out 409/s", "% of healthz")
	fmt.Fprint(w, header)
	byStrategy := map[string][]ceilingFigures{}
	var order []string
	for _, res := range r.Results {
		if res.Seconds <= 0 {
			continue
		}
		f := figuresOf(res)
		fmt.Fprintf(w, "%-10s %4d %s\n", res.Strategy, res.Run, f)
		if len(byStrategy[res.Strategy]) == 0 {
			order = append(order, res.Strategy)
		}
		byStrategy[res.Strategy] = append(byStrategy[res.Strategy], f)
	}
	if len(r.Results) == len(order) {
		return // one run each: nothing to take a median of
	}
	fmt.Fprintf(w, "\nmedians over the runs\n")
	fmt.Fprint(w, strings.Replace(header, " run", "runs", 1))
	for _, name := range order {
		fs := byStrategy[name]
		fmt.Fprintf(w, "%-10s %4d %s\n", name, len(fs), medianFigures(fs))
	}
}

// ceilingFigures are one run's figures against the ceilings; 0 is "not
// measured".
type ceilingFigures struct {
	sales, hotRow, timesHotRow, serial, ofSerial, soldOut, ofHealthz float64
}

func figuresOf(res Result) ceilingFigures {
	f := ceilingFigures{sales: float64(res.OK) / res.Seconds, hotRow: res.HotRowRate, serial: res.SerialRate, soldOut: res.SoldOutRate}
	if f.hotRow > 0 {
		f.timesHotRow = f.sales / f.hotRow
	}
	if f.serial > 0 {
		f.ofSerial = 100 * f.sales / f.serial
	}
	if f.soldOut > 0 && res.SoldOutHealthz > 0 {
		f.ofHealthz = 100 * f.soldOut / res.SoldOutHealthz
	}
	return f
}

// medianFigures is each figure's median over fs, apart.
func medianFigures(fs []ceilingFigures) ceilingFigures {
	pick := func(get func(ceilingFigures) float64) float64 {
		var v []float64
		for _, f := range fs {
			v = append(v, get(f))
		}
		return median(v)
	}
	return ceilingFigures{
		sales:       pick(func(f ceilingFigures) float64 { return f.sales }),
		hotRow:      pick(func(f ceilingFigures) float64 { return f.hotRow }),
		timesHotRow: pick(func(f ceilingFigures) float64 { return f.timesHotRow }),
		serial:      pick(func(f ceilingFigures) float64 { return f.serial }),
		ofSerial:    pick(func(f ceilingFigures) float64 { return f.ofSerial }),
		soldOut:     pick(func(f ceilingFigures) float64 { return f.soldOut }),
		ofHealthz:   pick(func(f ceilingFigures) float64 { return f.ofHealthz }),
	}
}

func (f ceilingFigures) String() string {
	figure := func(format string, v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	return fmt.Sprintf("%9.0f %9s %10s %9s %9s %14s %12s", f.sales, figure("%.0f", f.hotRow), figure("%.2f", f.timesHotRow), figure("%.0f", f.serial),
		figure("%.0f%%", f.ofSerial), figure("%.0f", f.soldOut), figure("%.0f%%", f.ofHealthz))
}

// medianSerial is each strategy's median serial ceiling over its runs.
func medianSerial(results []Result) map[string]float64 {
	byStrategy := map[string][]float64{}
	for _, res := range results {
		if res.SerialRate > 0 {
			byStrategy[res.Strategy] = append(byStrategy[res.Strategy], res.SerialRate)
		}
	}
	out := map[string]float64{}
	for name, v := range byStrategy {
		out[name] = median(v)
	}
	return out
}

// median is the middle of v (the mean of the two middles for an even
// count); 0 for none. Zeros (not measured) are left out.
func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return x <= 0 })
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
