package report

import (
	"bytes"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"strings"
	"testing"
)

func TestMatrixCellsAndExitStatus(t *testing.T) {
	safeBroken := load.Result{Safe: true, Verdict: verdict.Broken, Reasons: []string{"oversold 1 unit"}, Oversold: 1}
	var c Cell
	c.Safe = true
	c.Add(FaultRun{Result: load.Result{Safe: true, Verdict: verdict.Safe, OK: 5, SoldOut: 2, Unavailable: 1}, Overlaps: 2})
	c.Add(FaultRun{Result: safeBroken})
	c.Finish()
	if c.Short() != "1/2" || !c.SafeBroke || c.Definite != 7 || c.Indefinite != 1 || c.Oversold != 1 || c.Overlaps != 2 {
		t.Errorf("cell = %s, SafeBroke %v, definite %d, 5xx %d, oversold %d, overlaps %d; want 1/2, true, 7, 1, 1, 2",
			c.Short(), c.SafeBroke, c.Definite, c.Indefinite, c.Oversold, c.Overlaps)
	}
	var u Cell
	u.Add(FaultRun{Result: load.Result{Verdict: verdict.Oversold, Reasons: []string{"oversold"}}})
	u.Finish()
	if u.Short() != "0/1" || u.SafeBroke {
		t.Errorf("unsafe cell = %s, SafeBroke %v; want 0/1, false (expected to break)", u.Short(), u.SafeBroke)
	}
	var out bytes.Buffer
	PrintMatrix(&out, Matrix{Runs: 2, Strategies: []StrategyInfo{{"redis", true}}, Faults: []string{"replica-kill"},
		Cells: []Cell{{Strategy: "redis", Fault: "replica-kill", Safe: true, Runs: 2, Kept: 1, SafeBroke: true, Results: []FaultRun{{Result: safeBroken}}}}}, false)
	if !strings.Contains(out.String(), "1/2 BROKE") || !strings.Contains(out.String(), "SAFE STRATEGY BROKE") || strings.Contains(out.String(), "\x1b[") {
		t.Errorf("matrix without colour does not show the broken safe cell plainly:\n%s", out.String())
	}
}

// TestANotStruckCellHasItsOwnLabel: a cell whose fault did not strike reads
// DID NOT STRIKE in the table, the notes and the JSON, not a fraction with
// a star, and is not a safe strategy that broke.
func TestANotStruckCellHasItsOwnLabel(t *testing.T) {
	var c Cell
	c.Strategy, c.Fault, c.Missed = "none", "lock-expired-early", 3
	c.MarkNotStruck(FaultRun{Result: load.Result{Run: 3, Strategy: "none"}}, "DID NOT STRIKE: 0 of 1 runs struck; the last 3 tries did not: try 1: no lock")
	c.Finish()
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
