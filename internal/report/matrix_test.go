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
