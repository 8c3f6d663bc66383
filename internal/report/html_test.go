package report

import (
	"bytes"
	"inventory/internal/load"
	"regexp"
	"strings"
	"testing"
)

// TestHTMLReportIsSelfContained renders a report of a load test and a fault
// matrix: every chart is there, echarts is inlined, and nothing is loaded
// from elsewhere (the file must open offline).
func TestHTMLReportIsSelfContained(t *testing.T) {
	rep := &Report{Runs: 1, Results: []load.Result{
		{Run: 1, Strategy: "none", OK: 1030, FinalStock: -30, Oversold: 30, Timeline: []int64{50, 53}, PerReplica: map[string]int64{"inventory-1": 515, "inventory-2": 515}},
		{Run: 1, Strategy: "redis", Safe: true, OK: 1000, Breaches: 4, Timeline: []int64{30, 40, 30}, LatencyMs: load.Latency{P50: 3, P95: 9, P99: 12}},
	}}
	m := &Matrix{Runs: 3, Strategies: []StrategyInfo{{"none", false}, {"redis", true}}, Faults: []string{"redis-restart", "lock-expired-early"},
		Cells: []Cell{
			{Strategy: "none", Fault: "redis-restart", Runs: 3, Kept: 0},
			{Strategy: "none", Fault: "lock-expired-early", NotApplicable: "no lock"},
			{Strategy: "redis", Fault: "redis-restart", Safe: true, Runs: 3, Kept: 3},
			{Strategy: "redis", Fault: "lock-expired-early", Safe: true, Runs: 3, Kept: 3},
		}}
	var buf bytes.Buffer
	if err := renderHTML(&buf, rep, m); err != nil {
		t.Fatalf("renderHTML: %v", err)
	}
	page := buf.String()
	for _, want := range []string{"Sales per second over time", "Latency seen by the buyers", "Final stock and oversold units",
		"Answers per replica", "Lock breaches caught by the database", "What survives what", "lock-expired-early", "\"3/3\""} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if !strings.Contains(page, echartsJS[:200]) {
		t.Errorf("the report does not inline echarts")
	}
	if refs := regexp.MustCompile(`(?:src|href)="(https?:)?//[^"]*"`).FindAllString(page, -1); len(refs) > 0 {
		t.Errorf("the report loads %q from elsewhere; it must open offline", refs)
	}
}
