package report

import (
	"bytes"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"strings"
	"testing"
)

// TestMatrixCellsAndExitStatus: a cell sums its runs' figures, and the
// matrix shows the verdict verdict.JudgeCell gave it: BROKE for a broken
// invariant, STUCK for a strategy that sold nothing after the heal, and
// names those cells among the failures.
func TestMatrixCellsAndExitStatus(t *testing.T) {
	safeBroken := load.Result{Safe: true, Verdict: verdict.Broken, Reasons: []string{"oversold 1 unit"}, Oversold: 1}
	var c Cell
	c.Safe = true
	c.Add(FaultRun{Result: load.Result{Safe: true, Verdict: verdict.Safe, OK: 5, SoldOut: 2, Unavailable: 1, Wave: &load.WaveResult{Left: 3, OK: 3}}, Overlaps: 2, LeasesEnded: 4})
	c.Add(FaultRun{Result: safeBroken})
	if c.Runs != 2 || c.Definite != 7 || c.Indefinite != 1 || c.Oversold != 1 || c.Overlaps != 2 || c.LeasesEnded != 4 || c.WaveLeft != 3 || c.WaveSold != 3 {
		t.Errorf("cell = %d runs, definite %d, 5xx %d, oversold %d, overlaps %d, leases ended %d, wave %d/%d; want 2, 7, 1, 1, 2, 4, 3/3",
			c.Runs, c.Definite, c.Indefinite, c.Oversold, c.Overlaps, c.LeasesEnded, c.WaveSold, c.WaveLeft)
	}
	stuck := load.Result{Safe: true, Verdict: verdict.Stuck, Reasons: []string{"sold none of the 40 units left once the fault had healed"}}
	var out bytes.Buffer
	m := Matrix{Runs: 2, Strategies: []StrategyInfo{{"redis", true}}, Faults: []string{"replica-kill", "pg-restart"},
		Cells: []Cell{
			{Strategy: "redis", Fault: "replica-kill", Safe: true, Runs: 2, Kept: 1, SafeBroke: true, Failing: verdict.Broken, Fails: true, Results: []FaultRun{{Result: safeBroken}}},
			{Strategy: "redis", Fault: "pg-restart", Safe: true, Runs: 2, Kept: 1, SafeBroke: true, Failing: verdict.Stuck, Fails: true, Results: []FaultRun{{Result: stuck}}},
		}}
	PrintMatrix(&out, m, false)
	for _, want := range []string{"1/2 BROKE", "1/2 STUCK", "SAFE STRATEGY BROKE", "sold none of the 40 units"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the matrix lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Errorf("matrix without colour has escapes:\n%s", out.String())
	}
	if broke, _ := m.Failures(); len(broke) != 2 || broke[1] != "redis × pg-restart (STUCK)" {
		t.Errorf("Failures() = %q, want both cells, the second named STUCK", broke)
	}
}

// TestANotStruckCellHasItsOwnLabel: a cell whose fault did not strike reads
// DID NOT STRIKE in the table, the notes and the JSON, not a fraction with
// a star, and is not a safe strategy that broke.
func TestANotStruckCellHasItsOwnLabel(t *testing.T) {
	var c Cell
	c.Strategy, c.Fault, c.Missed = "none", "lock-expired-early", 3
	c.MarkNotStruck(FaultRun{Result: load.Result{Run: 3, Strategy: "none"}}, "DID NOT STRIKE: 0 of 1 runs struck; the last 3 tries did not: try 1: no lock")
	c.Fails = true
	if c.Short() != NotStruck || c.SafeBroke || c.Runs != 0 {
		t.Errorf("not-struck cell = %q, SafeBroke %v, %d runs; want %q, false, 0", c.Short(), c.SafeBroke, c.Runs, NotStruck)
	}
	m := Matrix{Runs: 1, Strategies: []StrategyInfo{{"none", false}}, Faults: []string{"lock-expired-early"}, Cells: []Cell{c}, Failed: true}
	var out bytes.Buffer
	PrintMatrix(&out, m, false)
	for _, want := range []string{"│ DID NOT STRIKE", "none × lock-expired-early run 3 (the fault did not strike: the cell proved nothing)", "try 1: no lock"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the matrix lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "0/1*") || strings.Contains(out.String(), "expected, unsafe") {
		t.Errorf("the matrix shows the not-struck cell as a fraction or a break:\n%s", out.String())
	}
	out.Reset()
	if err := WriteJSON(&out, m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"not_struck": "DID NOT STRIKE: 0 of 1 runs struck`) {
		t.Errorf("the JSON does not label the cell not_struck:\n%s", out.String())
	}
	if broke, notStruck := m.Failures(); len(broke) != 0 || len(notStruck) != 1 || notStruck[0] != "none × lock-expired-early" {
		t.Errorf("Failures() = %q, %q; want none, [none × lock-expired-early]", broke, notStruck)
	}
}
