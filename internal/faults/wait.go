package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitFor polls cond every millisecond until it holds. It returns ErrMissed when
// the run's buyers are all answered first, and ctx's error when ctx ends.
func waitFor(ctx context.Context, t Target, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-t.Selling:
			return fmt.Errorf("wait for %s: %w", what, ErrMissed)
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// sidePools matches the application_name of a replica's side pools
// (inventory-reads, inventory-settings, inventory-watchdog): their
// transactions are reads, the default's lease and the invariant watchdog's
// checks, never a sale, and the watchdog's runs every second.
const sidePools = "inventory-%"

// saleInFlight waits until a sale's transaction is open in Postgres (a
// session of the inventory database inside a transaction): a buyer is
// inside its critical section. Every strategy writes the stock row in a
// transaction, so every strategy passes through this state.
func saleInFlight(ctx context.Context, t Target) error {
	conn, err := pgx.Connect(ctx, t.Fleet.PostgresURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return waitFor(ctx, t, "a sale transaction open in pg_stat_activity", func(ctx context.Context) (bool, error) {
		var n int
		err := conn.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND xact_start IS NOT NULL AND backend_type = 'client backend'
			  AND application_name NOT LIKE $1`, sidePools).Scan(&n)
		return n > 0, err
	})
}

// sleep waits d, or until ctx ends: a fault's own duration, or a
// holder's time to settle, never a wait for a condition.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// replicasReady waits until every replica answers 200 on /readyz (it
// reaches Postgres and Redis again), for at most a minute each.
func replicasReady(ctx context.Context, t Target) error {
	for _, r := range t.Fleet.Replicas {
		if err := r.WaitReady(ctx, time.Minute); err != nil {
			return fmt.Errorf("after the fault: %w", err)
		}
	}
	return nil
}

// dueOrders waits, when t's buyers hold orders (t.Orders), until some held
// order is past its deadline: the expiry job has orders to expire, so a
// fault that strikes then strikes mid-sweep, or just before the next one.
// It returns at once for buyers who buy outright.
func dueOrders(ctx context.Context, t Target) error {
	return heldOrders(ctx, t, "a held order past its deadline", `expires_at <= now()`)
}

// holdsOutstanding waits, when t's buyers hold orders, until some order is
// held; at once for buyers who buy outright.
func holdsOutstanding(ctx context.Context, t Target) error {
	return heldOrders(ctx, t, "a held order", `true`)
}

// heldOrders waits, when t.Orders, until some held order passes cond (SQL).
func heldOrders(ctx context.Context, t Target, what, cond string) error {
	if !t.Orders {
		return nil
	}
	conn, err := pgx.Connect(ctx, t.Fleet.PostgresURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return waitFor(ctx, t, what, func(ctx context.Context) (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE state = 'held' AND `+cond+`)`).Scan(&ok)
		return ok, err
	})
}

// stepInFlight waits until a step of an order (pay, cancel, refund, ship:
// postgres.Store.Transition's guarded UPDATE and its event) is inside its
// transaction in Postgres.
func stepInFlight(ctx context.Context, t Target) error {
	return statementInFlight(ctx, t, "an order's step in its transaction",
		`UPDATE orders SET state = $2%`, `INSERT INTO order_events (order_id, state, by) VALUES%`)
}

// statementInFlight waits until a client backend of the inventory database,
// not idle, runs or last ran (inside its open transaction) a statement
// that matches one of the LIKE patterns.
func statementInFlight(ctx context.Context, t Target, what string, patterns ...string) error {
	conn, err := pgx.Connect(ctx, t.Fleet.PostgresURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return waitFor(ctx, t, what, func(ctx context.Context) (bool, error) {
		var n int
		err := conn.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND backend_type = 'client backend' AND state <> 'idle'
			  AND ltrim(query, E' \t\r\n') LIKE ANY ($1::text[])`, patterns).Scan(&n)
		return n > 0, err
	})
}
