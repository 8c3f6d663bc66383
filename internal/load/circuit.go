package load

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/verdict"
)

// Circuit is a product's sale circuit as the invariant watchdog opened it
// during a run (table circuits): the evidence it saw, the round's stock
// and ledger at its check, is how far the strategy had oversold when the
// breaker tripped; Result.Oversold is how far it got in all.
type Circuit = verdict.Circuit

// circuitWait bounds how long a run that broke an invariant waits for the
// watchdog to open its product's circuit: a few of its default 1s
// intervals, as a run can end before its next check.
const circuitWait = 5 * time.Second

// awaitCircuit returns the circuit opened on res's round of product: at
// once when the run kept the invariants (none opens then, unless a bug's
// did), else when the watchdog has opened it, or nil after circuitWait
// (a fleet with its watchdog off).
func awaitCircuit(ctx context.Context, pgURL, product string, res Result) (*Circuit, error) {
	c, err := readCircuit(ctx, pgURL, product, res.Round)
	if c != nil || err != nil || (res.Oversold == 0 && res.LostUpdates == 0) {
		return c, err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(circuitWait)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			return nil, nil
		case <-tick.C:
		}
		if c, err := readCircuit(ctx, pgURL, product, res.Round); c != nil || err != nil {
			return c, err
		}
	}
}

// ReadCircuit returns the circuit the watchdog opened on round of product,
// if it did (nil if not), from the fleet's Postgres.
func ReadCircuit(ctx context.Context, pgURL, product string, round int64) (*Circuit, error) {
	return readCircuit(ctx, pgURL, product, round)
}

func readCircuit(ctx context.Context, pgURL, product string, round int64) (*Circuit, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("the fleet's Postgres: %w", err)
	}
	defer conn.Close(ctx)
	c := Circuit{Product: product, Round: round}
	err = conn.QueryRow(ctx, `SELECT kind, quantity, initial, sold, open, opened_at, opened_by
		FROM circuits WHERE product_id = $1 AND round = $2`, product, round).
		Scan(&c.Kind, &c.Quantity, &c.Initial, &c.Sold, &c.Open, &c.OpenedAt, &c.OpenedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s's circuit: %w", product, err)
	}
	return &c, nil
}

// CircuitNotes says, for each run whose buyers were refused with 503
// circuit-open or during which the watchdog opened its product's circuit,
// what happened: how many buyers the open circuit refused (known in every
// mode, from the answers), and, when the fleet's Postgres is known, how far
// the strategy had oversold when the breaker tripped, how far in all, and
// how an admin closes it; base is the fleet's URL. None when no circuit
// opened.
func CircuitNotes(results []Result, base string) []string {
	var out []string
	for _, r := range results {
		c := r.Circuit
		refused := ""
		if r.CircuitRefused > 0 {
			refused = fmt.Sprintf("%d of its buyers got 503 circuit-open; ", r.CircuitRefused)
		}
		if c == nil {
			if r.CircuitRefused > 0 {
				out = append(out, fmt.Sprintf("circuit breaker: %s run %d: %sthe invariant watchdog had stopped the product's sales (it found the stock or the ledger broken). "+
					"Give the load tester --postgres-url to see what it found; POST %s/products/<id>/circuit (admin token) closes it; a restock starts a round it does not cover.",
					r.Strategy, r.Run, refused, base))
			}
			continue
		}
		state := "still open: every sale of it answers 503 circuit-open"
		if !c.Open {
			state = "closed since"
		}
		out = append(out, fmt.Sprintf("circuit breaker: %s run %d: %s%s's watchdog found %s %s (stock %d, %d sold of %d: %d over) and opened its circuit; "+
			"the run ended %d over, the circuit %s. POST %s/products/%s/circuit (admin token) closes it; a restock starts a round it does not cover.",
			r.Strategy, r.Run, refused, c.OpenedBy, c.Product, c.Kind, c.Quantity, c.Sold, c.Initial, c.OversoldAtTrip(), r.Oversold, state, base, c.Product))
	}
	return out
}
