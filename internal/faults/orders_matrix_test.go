package faults_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"inventory/internal/faults"
	"inventory/internal/faults/matrix"
	"inventory/internal/report"
	"inventory/internal/testenv"
)

// TestOrderFaultCells runs the fault matrix's orders mode for real: one
// safe strategy (atomic) under each fault of an order's life — a replica
// killed mid-step, Postgres restarted and failed over mid-sweep, Redis
// restarted with holds outstanding, the expiry job's runner paused past
// its lease — one run per cell, its buyers holding, abandoning,
// cancelling, paying at the deadline, refunded and shipped. Every cell
// must be SAFE with every invariant of an order's life read from
// Postgres, its history LINEARIZABLE with the returns in it, and its
// wave after the heal must sell; runner-pause must strike: another
// replica took the job over within the bound, with a newer token. (It
// lives beside the faults, not in the matrix's package, so that it runs
// beside the short matrix in make test rather than after it.)
func TestOrderFaultCells(t *testing.T) {
	testenv.InTier(t, testenv.TierFaults)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := matrix.Defaults()
	o.Runs, o.Stock, o.Buyers, o.Concurrency, o.Strategies, o.Spread = 1, 30, 60, 8, "atomic", 3*time.Second
	orders := matrix.DefaultOrders()
	o.Orders = &orders
	pause := &faults.RunnerPause{}
	fl := []faults.Fault{&faults.ReplicaKill{}, &faults.PGRestart{}, &faults.RedisRestart{}, pause, &faults.PGFailover{}}
	var progress bytes.Buffer
	m, err := matrix.Run(ctx, o, fl, &progress)
	if err != nil {
		t.Fatalf("matrix.Run(orders mode) = %v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	report.PrintMatrix(&out, m, false)
	t.Logf("orders mode:\n%s\n%s", progress.String(), out.String())
	if m.Orders == "" {
		t.Errorf("Matrix.Orders is empty: the matrix does not say its runs held orders")
	}
	if len(m.Cells) != len(fl) {
		t.Fatalf("%d cells, want %d", len(m.Cells), len(fl))
	}
	for _, c := range m.Cells {
		if c.Fails || c.Runs == 0 {
			t.Errorf("%s × %s: fails %v, %d runs: %s %s\n%s", c.Strategy, c.Fault, c.Fails, c.Runs, c.Short(), c.Failing, strings.Join(c.Results[0].Reasons, "; "))
			continue
		}
		for _, r := range c.Results {
			if r.Verdict != "SAFE" {
				t.Errorf("%s × %s run %d: %s (%s), want SAFE", c.Strategy, c.Fault, r.Run, r.Verdict, strings.Join(r.Reasons, "; "))
			}
			if r.History == nil || r.History.Verdict != "LINEARIZABLE" {
				t.Errorf("%s × %s run %d: history %+v, want LINEARIZABLE (answers %d 2xx, %d sold out, %d 503, %d errors, %d unknown)",
					c.Strategy, c.Fault, r.Run, r.History, r.OK, r.SoldOut, r.Unavailable, r.Errors, r.Unknown)
			}
			if r.Wave == nil || r.Wave.OK == 0 {
				t.Errorf("%s × %s run %d: wave after the heal %+v, want one that sold", c.Strategy, c.Fault, r.Run, r.Wave)
			}
			// The invariants of an order's life were read from Postgres,
			// and the expiry job returned abandoned units.
			if r.Orders == nil || r.Orders.Held == 0 || r.Orders.Expired == 0 || r.Orders.StillHeld != 0 {
				t.Errorf("%s × %s run %d: orders %+v, want held orders, some expired, none still held", c.Strategy, c.Fault, r.Run, r.Orders)
			} else {
				t.Logf("%s × %s run %d: orders %+v", c.Strategy, c.Fault, r.Run, *r.Orders)
			}
		}
	}
	strikes := pause.Strikes()
	if len(strikes) == 0 {
		t.Fatalf("runner-pause recorded no strike")
	}
	for _, s := range strikes {
		t.Logf("runner-pause: %+v", s)
		switch {
		case s.TakenBy == "" || s.TakenBy == s.Runner:
			t.Errorf("runner-pause paused %s and no other replica took the expiry job over (taken by %q)", s.Runner, s.TakenBy)
		case s.TakeoverAfter > s.Bound:
			t.Errorf("runner-pause: %s took the job over %v after the pause, past the bound %v", s.TakenBy, s.TakeoverAfter, s.Bound)
		}
		if s.TokenAfter <= s.TokenBefore {
			t.Errorf("runner-pause: the job's token went from %d to %d, want it risen (a new runner's lease)", s.TokenBefore, s.TokenAfter)
		}
	}
}
