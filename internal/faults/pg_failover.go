package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/fleet"
)

// PGFailover is pg-failover: Postgres runs as a primary and a standby
// under Patroni (see Needs), and the replicas reach it by a URL naming
// both (target_session_attrs=read-write). While a sale's transaction is
// open, the primary's replication is held back (its WAL senders stopped)
// until it holds a commit the standby does not have; then its Postgres is
// killed like a power cut (SIGKILL to the postmaster and its children) and
// Patroni promotes the standby. The replicas follow by themselves: their
// new connections find the writable member.
//
// With synchronous replication (the default) the commit the standby lacks
// is one waiting for it, never acknowledged: its buyer's connection dies,
// and the sale answers 503 (outcome-unknown when the ledger could not be
// read in time), never 200 for a sale the new primary lacks. With Async
// (pg-failover-async, the demonstration) it is a sale already answered
// 200, and the failover loses it: the run breaks, as it should.
//
// Heal waits until the old primary, rewound, is the new one's standby
// again and every replica is ready.
type PGFailover struct {
	// Async replicates asynchronously (fleet.Options.PostgresAsync): the
	// fault is then pg-failover-async. Default false: synchronous.
	Async bool

	fleet  *fleet.Fleet
	outage time.Duration // from holding replication back until the standby accepted writes
}

// Outage implements Outage: from when the primary's replication was held
// back (its commits wait from then on) until the standby, promoted,
// accepted writes.
func (f *PGFailover) Outage() time.Duration { return f.outage }

// Name implements Fault.
func (f *PGFailover) Name() string {
	if f.Async {
		return "pg-failover-async"
	}
	return "pg-failover"
}

// Scope implements Scoped.
func (*PGFailover) Scope() Scope { return ScopeFleet }

// Needs implements FleetNeeds: Postgres under Patroni, its standby
// synchronous unless Async.
func (f *PGFailover) Needs(opts *fleet.Options) {
	opts.PostgresHA = true
	opts.PostgresAsync = f.Async
}

const (
	// asyncAhead is how many sales the primary acknowledges that its
	// asynchronous standby does not have before pg-failover-async strikes.
	asyncAhead = 3
	// patroniHeal bounds the wait for a failed-over cluster to be whole
	// again: the old primary's crash recovery, pg_rewind and restart.
	patroniHeal = 3 * time.Minute
)

// Inject implements Fault. It strikes as described on PGFailover, once a
// held order is past its deadline too when the buyers hold orders
// (Target.Orders: mid-sweep), and returns once the standby is the primary
// and accepts writes.
func (f *PGFailover) Inject(ctx context.Context, t Target) error {
	cluster := t.Fleet.Patroni
	if cluster == nil {
		return errors.New("pg-failover: the fleet's Postgres has no standby to fail over to: start it with PostgresHA")
	}
	primary, err := cluster.WaitHealthy(ctx, failoverWait)
	if err != nil {
		return fmt.Errorf("pg-failover: before the failover: %w", err)
	}
	if err := dueOrders(ctx, t); err != nil { // with orders: mid-sweep
		return err
	}
	if err := saleInFlight(ctx, t); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, primary.URL("inventory"))
	if err != nil {
		return fmt.Errorf("pg-failover: connect to the primary: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var last int64
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM sales").Scan(&last); err != nil {
		return fmt.Errorf("pg-failover: %w", err)
	}
	f.outage = 0
	began := time.Now()
	release, err := primary.HoldBackReplication(ctx)
	if err != nil {
		return fmt.Errorf("pg-failover: %w", err)
	}
	f.fleet = t.Fleet
	// Synchronously, a commit waits for the standby (wait event SyncRep);
	// asynchronously, sales commit that the standby never receives.
	err = waitFor(ctx, t, "a commit on the primary that its standby does not have", func(ctx context.Context) (bool, error) {
		var waiting, ahead int
		err := conn.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'),
			       (SELECT count(*) FROM sales WHERE id > $1)`, last).Scan(&waiting, &ahead)
		return waiting > 0 || ahead >= asyncAhead, err
	})
	if err != nil {
		release()
		return err
	}
	if err := primary.Crash(); err != nil {
		release()
		return fmt.Errorf("pg-failover: %w", err)
	}
	if err := cluster.WaitPrimary(ctx, cluster.Other(primary), failoverWait); err != nil {
		return fmt.Errorf("pg-failover: Patroni did not promote the standby: %w", err)
	}
	f.outage = time.Since(began)
	return nil
}

// Heal implements Fault.
func (f *PGFailover) Heal(ctx context.Context) error {
	if f.fleet == nil {
		return nil
	}
	fl := f.fleet
	f.fleet = nil
	if _, err := fl.Patroni.WaitHealthy(ctx, patroniHeal); err != nil {
		return fmt.Errorf("pg-failover: after the failover: %w", err)
	}
	return replicasReady(ctx, Target{Fleet: fl})
}

var _ Fault = (*PGFailover)(nil)
