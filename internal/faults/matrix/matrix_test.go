package matrix

import (
	"bytes"
	"context"
	"fmt"
	"inventory/internal/faults"
	"inventory/internal/report"
	"inventory/internal/testenv"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFaultsRunOnTheFleetTheyNeed: redis-failover asks for a Sentinel,
// pg-failover for Postgres under Patroni and clock-jump for Redis servers
// under libfaketime, so each gets a fleet of its own; the other faults share the plain one, and the merged matrix
// keeps the vocabulary's order.
func TestFaultsRunOnTheFleetTheyNeed(t *testing.T) {
	base := matrixFleet(Options{WorkDelay: time.Millisecond, LockTTL: time.Second}, "/bin/inventory")
	groups := groupByFleet(base, faults.All())
	var got []string
	for _, g := range groups {
		var names []string
		for _, f := range g.faults {
			names = append(names, f.Name())
		}
		got = append(got, fmt.Sprintf("sentinel=%v cluster=%v fakeclock=%v patroni=%v links=%v: %s",
			g.opts.RedisSentinel, g.opts.RedisCluster, g.opts.FakeClock, g.opts.PostgresHA, g.opts.NetLinks, strings.Join(names, ",")))
	}
	plain := slices.DeleteFunc(faults.Names(), func(n string) bool {
		return n == "redis-failover" || n == "redis-cluster-failover" || n == "clock-jump" || n == "pg-failover"
	})
	want := []string{"sentinel=false cluster=false fakeclock=false patroni=false links=true: " + strings.Join(plain, ","),
		"sentinel=true cluster=false fakeclock=false patroni=false links=true: redis-failover",
		"sentinel=false cluster=true fakeclock=false patroni=false links=true: redis-cluster-failover",
		"sentinel=false cluster=false fakeclock=false patroni=true links=true: pg-failover",
		"sentinel=false cluster=false fakeclock=true patroni=false links=true: clock-jump"}
	if !slices.Equal(got, want) {
		t.Errorf("groupByFleet(all faults) = %q, want %q", got, want)
	}
	if base.RedisSentinel || base.FakeClock || base.Env["INVENTORY_LOCK_TTL"] != "1s" {
		t.Errorf("grouping changed the base options: %+v", base)
	}

	var parts []report.Matrix
	for _, g := range groups {
		p := report.Matrix{Runs: 1, Strategies: []report.StrategyInfo{{Name: "redis", Safe: true}, {Name: "none", Safe: false}}}
		for _, f := range g.faults {
			p.Faults = append(p.Faults, f.Name())
			p.FaultSeconds = append(p.FaultSeconds, float64(len(f.Name())))
		}
		for _, s := range p.Strategies {
			for _, f := range p.Faults {
				p.Cells = append(p.Cells, report.Cell{Strategy: s.Name, Fault: f, Safe: s.Safe, SafeBroke: f == "redis-failover" && s.Safe})
			}
		}
		p.Failed = anySafeBroke(p)
		parts = append(parts, p)
	}
	m := mergeMatrices(parts, faults.All())
	if !slices.Equal(m.Faults, faults.Names()) || len(m.FaultSeconds) != len(m.Faults) || !m.Failed || len(m.Strategies) != 2 {
		t.Fatalf("merged matrix: faults %v, seconds %v, failed %v, strategies %v; want every fault in order with its seconds, failed, 2 strategies",
			m.Faults, m.FaultSeconds, m.Failed, m.Strategies)
	}
	for i, f := range m.Faults {
		if m.FaultSeconds[i] != float64(len(f)) {
			t.Errorf("merged FaultSeconds[%d] (%s) = %v, want %v", i, f, m.FaultSeconds[i], len(f))
		}
	}
	var cells []string
	for _, c := range m.Cells {
		cells = append(cells, c.Strategy+"×"+c.Fault)
	}
	var wantCells []string
	for _, s := range []string{"redis", "none"} {
		for _, f := range faults.Names() {
			wantCells = append(wantCells, s+"×"+f)
		}
	}
	if !slices.Equal(cells, wantCells) {
		t.Errorf("merged cells = %v, want %v (rows by strategy, faults in order)", cells, wantCells)
	}
}

// TestShortFaultMatrix runs one faulted run of every strategy the fleet
// offers under every fault, against real two-replica fleets (one for the
// faults that need nothing more, one with a Sentinel for redis-failover,
// one on Patroni for pg-failover, one under libfaketime for clock-jump),
// and fails when a safe strategy breaks an invariant. Unsafe strategies may
// break: that is what they are for. Side by side, a fault that strikes the
// whole fleet costs one round for all strategies, so the matrix `make test`
// runs is short in runs (one per cell) and buyers, not in faults.
func TestShortFaultMatrix(t *testing.T) {
	testenv.InTier(t, testenv.TierFaults)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// `loadtest faults --runs 1 --stock 40 --buyers 80`: every fault, one
	// fleet at a time. (Two at once, --fleets 2, was no shorter inside make
	// test: 250 and 337 s against 273 s one at a time, the two cores being
	// busy with the other packages too.)
	o := Defaults()
	o.Runs, o.Stock, o.Buyers = 1, 40, 80
	// runner-pause strikes the expiry job, not a sale: it runs in orders
	// mode on a small set of strategies (TestOrderFaultCells in
	// internal/faults, beside this one), not for every strategy here.
	fl := slices.DeleteFunc(faults.All(), func(f faults.Fault) bool { return f.Name() == (&faults.RunnerPause{}).Name() })
	var names []string
	for _, f := range fl {
		names = append(names, f.Name())
	}
	var progress bytes.Buffer
	m, err := Run(ctx, o, fl, &progress)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	report.PrintMatrix(&out, m, false)
	t.Logf("short fault matrix:\n%s\n%s", progress.String(), out.String())
	if want := len(m.Strategies) * len(fl); len(m.Cells) != want {
		t.Errorf("%d cells, want %d (strategies × faults)", len(m.Cells), want)
	}
	for _, c := range m.Cells {
		if c.SafeBroke {
			t.Errorf("%s (safe) × %s: %s %s\n%s", c.Strategy, c.Fault, c.Short(), c.Failing, reasons(c))
		}
		for _, r := range c.Results {
			if r.Verdict == NotStruck {
				t.Errorf("%s × %s: %s", c.Strategy, c.Fault, strings.Join(r.Reasons, "; "))
				continue
			}
			// Every judged run was checked to the end and, once its fault
			// had healed, sold again to a wave of buyers.
			if c.Safe && (r.History == nil || r.History.Verdict != "LINEARIZABLE") {
				t.Errorf("%s × %s run %d: history %+v, want LINEARIZABLE", c.Strategy, c.Fault, r.Run, r.History)
			}
			if r.Wave == nil || (c.Safe && r.Wave.OK == 0) {
				t.Errorf("%s × %s run %d: wave after the heal %+v, want one that sold", c.Strategy, c.Fault, r.Run, r.Wave)
			}
		}
		if c.NotApplicable == "" && c.Runs == 0 {
			t.Errorf("%s × %s: no run was struck mid-sale (%d missed)", c.Strategy, c.Fault, c.Missed)
		}
		if c.Fails != (c.SafeBroke || c.NotStruck != "") {
			t.Errorf("%s × %s: fails %v, SafeBroke %v, NotStruck %q", c.Strategy, c.Fault, c.Fails, c.SafeBroke, c.NotStruck)
		}
	}
	if got, want := strings.Join(m.Faults, ","), strings.Join(names, ","); got != want {
		t.Errorf("faults %s, want %s (every fault, in the vocabulary's order)", got, want)
	}
	if want := anySafeBroke(m) || anyNotStruck(m); m.Failed != want {
		t.Errorf("Matrix.Failed = %v, want %v", m.Failed, want)
	}
	// clock-jump breaks the Redis locks and leases it reaches: every cell
	// it applies to shows one broken (else it fails, DID NOT STRIKE,
	// above), and no safe strategy oversold.
	for _, c := range m.Cells {
		if c.Fault != (&faults.ClockJump{}).Name() || c.NotApplicable != "" {
			continue
		}
		if c.Safe && c.Oversold > 0 {
			t.Errorf("%s × clock-jump oversold %d", c.Strategy, c.Oversold)
		}
		t.Logf("%s × clock-jump: leases ended %d, lost %d, overlaps %d, breaches %d/%d", c.Strategy, c.LeasesEnded, c.LeasesLost, c.Overlaps, c.Breaches, c.BreachMetric)
	}
	// The unsafe strategies are still caught: none oversells under some
	// fault (local and setnx do now and then, by chance: in one run per
	// cell, setnx kept every invariant under every fault once).
	for _, name := range []string{"none"} {
		broke := 0
		for _, c := range m.Cells {
			if c.Strategy == name {
				broke += c.Runs - c.Kept
			}
		}
		if broke == 0 {
			t.Errorf("%s broke no invariant under any fault, want it caught", name)
		}
	}
	// A lock strategy keeps its lock in Redis: lock-expired-early must act on it.
	for _, c := range m.Cells {
		if c.Strategy == "redis" && c.Fault == (&faults.LockExpiredEarly{}).Name() && c.NotApplicable != "" {
			t.Errorf("redis × lock-expired-early: n/a (%s), want the lock key found and deleted", c.NotApplicable)
		}
	}
}

func reasons(c report.Cell) string {
	var b strings.Builder
	for _, r := range c.Results {
		b.WriteString(strings.Join(r.Reasons, "; "))
		b.WriteString("\n")
	}
	return b.String()
}

func anyNotStruck(m report.Matrix) bool {
	for _, c := range m.Cells {
		for _, r := range c.Results {
			if r.Verdict == NotStruck {
				return true
			}
		}
	}
	return false
}

func anySafeBroke(m report.Matrix) bool {
	for _, c := range m.Cells {
		if c.SafeBroke {
			return true
		}
	}
	return false
}
