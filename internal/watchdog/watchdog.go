// Package watchdog checks the stock invariants while the fleet runs and
// cuts a product's sales off when one breaks. Every Interval it reads, in
// one snapshot, each product touched lately: the current round's stock must
// not be below zero, and its ledger must hold exactly initial − stock units.
// A violation opens the product's circuit (see Circuits): every replica
// then refuses that product's sales with ErrCircuitOpen until an admin
// closes it or a restock starts a new round. A safe strategy never trips
// it; an unsafe one is stopped within about one Interval of its first
// oversold unit.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kinds of violation, the kind label of the metric.
const (
	NegativeStock  = "negative_stock"  // the round's stock is below zero: oversold
	LedgerMismatch = "ledger_mismatch" // initial − stock is not the round's ledger units
)

// Violation is one product's broken invariant, with its evidence.
type Violation struct {
	Product string
	Round   int
	Kind    string
	// Quantity is the round's stock, Initial its first stock, Sold the
	// units of its ledger rows, all read in one snapshot.
	Quantity, Initial, Sold int64
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: round %d of %q has stock %d, initial %d, %d units in the ledger", v.Kind, v.Round, v.Product, v.Quantity, v.Initial, v.Sold)
}

// Observer receives what the watchdog finds, e.g. for metrics.
type Observer interface {
	// Violated reports evidence of a violation not seen before (the same
	// evidence is reported once, however long it stays).
	Violated(v Violation)
	// CircuitOpen reports the circuits this replica refuses sales for, after
	// each refresh: the products open now.
	CircuitOpen(products []string)
}

// Options configure a Watchdog; the zero value works.
type Options struct {
	// Interval is how often products are checked and circuits refreshed;
	// default 1s.
	Interval time.Duration
	// Instance names this replica in the circuits it opens.
	Instance string
	Logger   *slog.Logger
	Observer Observer
}

// touchedMargin reaches back before the last check: a sale's transaction
// stamps updated_at with its start and may commit after a check began.
const touchedMargin = 30 * time.Second

// Watchdog checks the invariants of one database's products.
type Watchdog struct {
	pool     *pgxpool.Pool
	circuits *Circuits
	opts     Options
	since    time.Time // Postgres's clock at the last check's start
}

// New returns a watchdog over pool that opens circuits in c.
func New(pool *pgxpool.Pool, c *Circuits, opts Options) *Watchdog {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watchdog{pool: pool, circuits: c, opts: opts}
}

// Run checks every Interval until ctx ends. A check that fails (Postgres
// away) is logged and tried again at the next tick.
func (w *Watchdog) Run(ctx context.Context) {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		if _, err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.opts.Logger.Warn("invariant watchdog: check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check checks the products touched since the last check, opens a circuit
// for each violation, refreshes this replica's view of the open circuits,
// and returns the violations found.
func (w *Watchdog) Check(ctx context.Context) ([]Violation, error) {
	found, now, err := w.read(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range found {
		opened, err := w.circuits.open(ctx, v, w.opts.Instance)
		if err != nil {
			return found, err
		}
		if opened {
			w.opts.Logger.Error("invariant violated: sales of the product stopped until an admin closes its circuit",
				"product_id", v.Product, "round", v.Round, "kind", v.Kind,
				"quantity", v.Quantity, "initial", v.Initial, "sold", v.Sold)
			if w.opts.Observer != nil {
				w.opts.Observer.Violated(v)
			}
		}
	}
	open, err := w.circuits.Refresh(ctx)
	if err != nil {
		return found, err
	}
	if w.opts.Observer != nil {
		w.opts.Observer.CircuitOpen(open)
	}
	w.since = now
	return found, nil
}

// read reads, in one snapshot, every product touched since the last check
// and returns those whose current round breaks an invariant, with the
// snapshot's time.
func (w *Watchdog) read(ctx context.Context) ([]Violation, time.Time, error) {
	tx, err := w.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("watchdog: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("watchdog: read the clock: %w", err)
	}
	since := time.Time{}
	if !w.since.IsZero() {
		since = w.since.Add(-touchedMargin)
	}
	// The touched products first, then each one's round from the ledger by
	// its own statement: a sum correlated with the stock row is planned for
	// an average product, and on a ledger one product dominates that plan
	// is a scan of the whole ledger every second (measured: 340 ms a
	// product on 1M rows); with the product named, and planned for it (the
	// pool's plan_cache_mode), it is an index range scan of one round.
	rows, err := tx.Query(ctx, `SELECT product_id, round, quantity, initial FROM stock WHERE updated_at >= $1`, since)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("watchdog: read the stock: %w", err)
	}
	touched, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Violation, error) {
		var v Violation
		err := row.Scan(&v.Product, &v.Round, &v.Quantity, &v.Initial)
		return v, err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("watchdog: read the stock: %w", err)
	}
	var sums pgx.Batch
	for i := range touched {
		v := &touched[i]
		// The units a round's sales took and kept: its ledger less the
		// units returned to its stock (cancelled, expired, refunded orders).
		sums.Queue(`SELECT (SELECT coalesce(sum(quantity), 0) FROM sales WHERE product_id = $1 AND round = $2)
		                 - (SELECT coalesce(sum(quantity), 0) FROM returns WHERE product_id = $1 AND round = $2 AND restored)`, v.Product, v.Round).
			QueryRow(func(row pgx.Row) error { return row.Scan(&v.Sold) })
	}
	if len(touched) > 0 {
		if err := tx.SendBatch(ctx, &sums).Close(); err != nil {
			return nil, time.Time{}, fmt.Errorf("watchdog: read the ledger: %w", err)
		}
	}
	var found []Violation
	for _, v := range touched {
		switch {
		case v.Quantity < 0:
			v.Kind = NegativeStock
		case v.Initial-v.Quantity != v.Sold:
			v.Kind = LedgerMismatch
		default:
			continue
		}
		found = append(found, v)
	}
	return found, now, nil
}

// ErrCircuitOpen: the product's sales are stopped because the watchdog
// found its stock broken; nothing was tried.
var ErrCircuitOpen = errors.New("the product's sale circuit is open")
