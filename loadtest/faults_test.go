package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"inventory/internal/faults"
	"inventory/internal/fleet"
)

// TestShortFaultMatrix runs one faulted run of every strategy the fleet
// offers under every fault, against a real two-replica fleet, and fails
// when a safe strategy breaks an invariant. Unsafe strategies may break:
// that is what they are for. Side by side, a fault that strikes the whole
// fleet costs one round for all strategies, so the matrix `make test` runs
// is short in runs (one per cell) and buyers, not in faults.
func TestShortFaultMatrix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	o, err := parseFaultFlags([]string{"--runs", "1", "--stock", "40", "--buyers", "80"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := pickFaults(o.faults)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.Start(ctx, fleet.Options{Replicas: 2, NetLinks: true, RedisReplica: true,
		Env: map[string]string{"INVENTORY_WORK_DELAY": o.workDelay.String(), "INVENTORY_LOCK_TTL": o.lockTTL.String()}})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	var progress bytes.Buffer
	m, err := faultMatrix(ctx, f, o, fl, &progress)
	if err != nil {
		t.Fatalf("faultMatrix: %v\n%s\nreplica 1 log tail:\n%s", err, progress.String(), tail(f.Replicas[0].Logs(), 3000))
	}
	var out bytes.Buffer
	printMatrix(&out, m, false)
	t.Logf("short fault matrix:\n%s\n%s", progress.String(), out.String())
	if want := len(m.Strategies) * len(fl); len(m.Cells) != want {
		t.Errorf("%d cells, want %d (strategies × faults)", len(m.Cells), want)
	}
	for _, c := range m.Cells {
		if c.SafeBroke {
			t.Errorf("%s (safe) × %s: %s kept every invariant\n%s", c.Strategy, c.Fault, c.Short(), reasons(c))
		}
		if c.Safe && c.NotApplicable == "" && c.Runs == 0 {
			t.Errorf("%s × %s: no run was struck mid-sale (%d missed)", c.Strategy, c.Fault, c.Missed)
		}
	}
	if m.Failed != anySafeBroke(m) {
		t.Errorf("Matrix.Failed = %v, want %v", m.Failed, !m.Failed)
	}
	// A lock strategy keeps its lock in Redis: lock-expired-early must act on it.
	for _, c := range m.Cells {
		if c.Strategy == "redis" && c.Fault == (&faults.LockExpiredEarly{}).Name() && c.NotApplicable != "" {
			t.Errorf("redis × lock-expired-early: n/a (%s), want the lock key found and deleted", c.NotApplicable)
		}
	}
}

func reasons(c Cell) string {
	var b strings.Builder
	for _, r := range c.Results {
		b.WriteString(strings.Join(r.Reasons, "; "))
		b.WriteString("\n")
	}
	return b.String()
}

func anySafeBroke(m Matrix) bool {
	for _, c := range m.Cells {
		if c.SafeBroke {
			return true
		}
	}
	return false
}

func TestMatrixCellsAndExitStatus(t *testing.T) {
	safeBroken := Result{Safe: true, Verdict: VerdictBroken, Reasons: []string{"oversold 1 unit"}, Oversold: 1}
	var c Cell
	c.Safe = true
	c.add(FaultRun{Result: Result{Safe: true, Verdict: VerdictSafe, OK: 5, SoldOut: 2, Unavailable: 1}, Overlaps: 2})
	c.add(FaultRun{Result: safeBroken})
	c.finish()
	if c.Short() != "1/2" || !c.SafeBroke || c.Definite != 7 || c.Indefinite != 1 || c.Oversold != 1 || c.Overlaps != 2 {
		t.Errorf("cell = %s, SafeBroke %v, definite %d, 5xx %d, oversold %d, overlaps %d; want 1/2, true, 7, 1, 1, 2",
			c.Short(), c.SafeBroke, c.Definite, c.Indefinite, c.Oversold, c.Overlaps)
	}
	var u Cell
	u.add(FaultRun{Result: Result{Verdict: VerdictOversold, Reasons: []string{"oversold"}}})
	u.finish()
	if u.Short() != "0/1" || u.SafeBroke {
		t.Errorf("unsafe cell = %s, SafeBroke %v; want 0/1, false (expected to break)", u.Short(), u.SafeBroke)
	}
	var out bytes.Buffer
	printMatrix(&out, Matrix{Runs: 2, Strategies: []StrategyInfo{{"redis", true}}, Faults: []string{"replica-kill"},
		Cells: []Cell{{Strategy: "redis", Fault: "replica-kill", Safe: true, Runs: 2, Kept: 1, SafeBroke: true, Results: []FaultRun{{Result: safeBroken}}}}}, false)
	if !strings.Contains(out.String(), "1/2 BROKE") || !strings.Contains(out.String(), "SAFE STRATEGY BROKE") || strings.Contains(out.String(), "\x1b[") {
		t.Errorf("matrix without colour does not show the broken safe cell plainly:\n%s", out.String())
	}
}
