package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

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
	// to Postgres like pgbench: the minimal one-sale transaction, the
	// guarded UPDATE … WHERE quantity >= 1 and one ledger INSERT, no round
	// totals (sellOneStraight), from HotRowClients connections, measured at
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
	// per second by one buyer at a time through the API (see SerialRate):
	// for a lock strategy its lock round trips, read, write and commit
	// back to back, and one HTTP round trip.
	Serial  map[string]float64 `json:"serial_sales_per_s,omitempty"`
	Seconds float64            `json:"seconds_each"`
	// ManyRows is, with several products (--products N), the same minimal
	// one-sale transactions straight to Postgres, each on a product drawn uniformly
	// from N of its own (pgbench's random account), from ManyRowsClients
	// connections: what a many-product run's sales per second are a share
	// of. 0: not measured.
	ManyRows         float64 `json:"many_rows_tps,omitempty"`
	ManyRowsProducts int     `json:"many_rows_products,omitempty"`
	ManyRowsClients  int     `json:"many_rows_clients,omitempty"`
	// Budgets are issue 38's budgets judged against these ceilings once
	// the runs are done (RunBudgets): each a ratio, its target, met or
	// not.
	Budgets []Budget `json:"budgets,omitempty"`
}

// HotRowClients is pgbench's client count in the reference figure.
const HotRowClients = 8

// MeasureCeilings measures each ceiling the strategies share for d;
// pgURL and redisURL may be empty, which skips that ceiling. (Each
// strategy's serial ceiling is measured beside its runs: SerialRate.)
//
// With products above 1, it also measures the many-row ceiling (ManyRows)
// on that many products, from the run's concurrency of clients (at most
// ManyRowsMaxClients).
func MeasureCeilings(ctx context.Context, c *Client, pgURL, redisURL string, concurrency, products int, d time.Duration) (Ceilings, error) {
	out := Ceilings{Seconds: d.Seconds(), HotRowClients: HotRowClients}
	if pgURL != "" {
		tps, err := HotRowRate(ctx, c, pgURL, d)
		if err != nil {
			return out, fmt.Errorf("hot-row ceiling: %w", err)
		}
		out.HotRow = tps
	}
	if pgURL != "" && products > 1 {
		clients := min(concurrency, ManyRowsMaxClients)
		tps, err := ManyRowsRate(ctx, c, pgURL, products, clients, d)
		if err != nil {
			return out, fmt.Errorf("many-row ceiling: %w", err)
		}
		out.ManyRows, out.ManyRowsProducts, out.ManyRowsClients = tps, products, clients
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

// HotRowRate sells one unit per transaction of a product of its own,
// restocked through the API so that its ledger stays consistent: the
// minimal one-sale transaction (sellOneStraight), from HotRowClients
// connections, as pgbench runs it.
func HotRowRate(ctx context.Context, c *Client, pgURL string, d time.Duration) (float64, error) {
	const id = "ceiling-hot-row"
	if _, err := c.restock(ctx, id, 1_000_000_000); err != nil {
		return 0, err
	}
	pool, err := ceilingPool(ctx, pgURL, HotRowClients)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	tps, err := rate(ctx, HotRowClients, d, func(ctx context.Context) error {
		return sellOneStraight(ctx, pool, id)
	})
	if err != nil {
		return 0, err
	}
	return tps, addTotals(ctx, pool, []string{id})
}

// ManyRowsMaxClients bounds the many-row ceiling's connections: the two
// replicas of the local fleet sell from 16 Postgres connections each.
const ManyRowsMaxClients = 32

// ManyRowsRate sells one unit per transaction, like HotRowRate, each
// transaction of a product drawn uniformly from n of its own
// ("ceiling-many-1" …), restocked through the API, from clients
// connections: pgbench's many-row rate in the shape of a sale.
func ManyRowsRate(ctx context.Context, c *Client, pgURL string, n, clients int, d time.Duration) (float64, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("ceiling-many-%d", i+1)
	}
	if err := forEachProduct(ctx, ids, adminParallel(clients), func(ctx context.Context, _ int, id string) error {
		_, err := c.restock(ctx, id, 1_000_000_000)
		return err
	}); err != nil {
		return 0, err
	}
	pool, err := ceilingPool(ctx, pgURL, clients)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	tps, err := rate(ctx, clients, d, func(ctx context.Context) error {
		return sellOneStraight(ctx, pool, ids[rand.IntN(n)])
	})
	if err != nil {
		return 0, err
	}
	return tps, addTotals(ctx, pool, ids)
}

// ceilingPool is a pool of conns connections to the fleet's Postgres.
func ceilingPool(ctx context.Context, pgURL string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// sellOneStraight is the ceilings' transaction: the minimal one-sale
// transaction, as pgbench runs it (docs/performance.md) — the guarded
// UPDATE of id's stock row and one ledger INSERT, committed, two
// statements and no more. Not the service's own sale, which also upserts
// its round's totals (round_totals), a second hot row in the same
// transaction that made the ceiling slow and noisy (354 and 1,260 tx/s in
// two runs where pgbench's minimal transaction ran at 1,585); the
// ceiling's rounds get their totals afterwards (addTotals).
func sellOneStraight(ctx context.Context, pool *pgxpool.Pool, id string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var round int
	if err := tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - 1, updated_at = now()
		WHERE product_id = $1 AND quantity >= 1 RETURNING round`, id).Scan(&round); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO sales (product_id, round, quantity, strategy, instance)
		VALUES ($1, $2, 1, 'ceiling', 'loadtest')`, id, round); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// addTotals writes the current round's totals of each of ids from its
// ledger, once the ceiling is measured: sellOneStraight leaves them out,
// and GET /products/{id}'s sold reads them. (The invariants — the
// watchdog's, the load tester's — are read from the ledger itself, so a
// ceiling's product breaks none while its totals lag.) Nothing else sells
// these products.
func addTotals(ctx context.Context, pool *pgxpool.Pool, ids []string) error {
	_, err := pool.Exec(ctx, `
		INSERT INTO round_totals AS t (product_id, round, units, sales)
		SELECT l.product_id, l.round, sum(l.quantity), count(*)
		FROM stock s JOIN sales l ON l.product_id = s.product_id AND l.round = s.round
		WHERE s.product_id = ANY($1)
		GROUP BY l.product_id, l.round
		ON CONFLICT (product_id, round) DO UPDATE SET units = EXCLUDED.units, sales = EXCLUDED.sales`, ids)
	if err != nil {
		return fmt.Errorf("the ceiling's round totals: %w", err)
	}
	return nil
}

// SerialRate sells a product of its own by strategy name through the API,
// one buyer at a time: the strategy's serial ceiling as a client sees it,
// its lock's and its sale's round trips back to back, plus one HTTP round
// trip through nginx. 0 and no error when the fleet offers the strategy
// without its lock service (503 strategy-unavailable).
func SerialRate(ctx context.Context, c *Client, name string, d time.Duration) (float64, error) {
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

// SoldOutPhase measures, for d each, the 409s per second that buyers of the
// sold-out product get with strategy and the GET /healthz answers per
// second, in alternating slices (at least two of each).
func SoldOutPhase(ctx context.Context, c *Client, product, strategy string, concurrency int, d time.Duration) (soldOut, healthz float64, err error) {
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
func soldOutRate(ctx context.Context, c *Client, product, strategy string, concurrency int, d time.Duration) (float64, error) {
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
