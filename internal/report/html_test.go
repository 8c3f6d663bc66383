package report

import (
	"bytes"
	"fmt"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"regexp"
	"strings"
	"testing"
)

// TestHTMLReportIsSelfContained renders a report of a load test and a fault
// matrix: the verdict table and the settings come first, then every chart
// and the matrix; echarts is inlined, and nothing is loaded from elsewhere
// (the file must open offline).
func TestHTMLReportIsSelfContained(t *testing.T) {
	rep := &Report{Runs: 1, LocalFleet: true, Target: "http://127.0.0.1:1", Product: "sku-loadtest", Stock: 1000, Buyers: 1500, Concurrency: 64,
		WorkDelay: "5ms", StartedAt: "2026-11-25T10:00:00Z", Commit: "720ee85abcde", Results: []load.Result{
			{Run: 1, Strategy: "none", Initial: 1000, LedgerUnits: 1030, OK: 1030, FinalStock: -30, Oversold: 30, Verdict: verdict.Oversold, Reasons: []string{"oversold 30 units"},
				Timeline: []int64{50, 53}, PerReplica: map[string]int64{"inventory-1": 515, "inventory-2": 515}},
			{Run: 1, Strategy: "redis", Safe: true, Initial: 1000, LedgerUnits: 1000, OK: 1000, SoldOut: 500, Breaches: 4, Verdict: verdict.Safe, StateFrom: load.FromAPI,
				Timeline: []int64{30, 40, 30}, LatencyMs: load.Latency{P50: 3, P95: 9, P99: 12}},
		}}
	m := &Matrix{Runs: 3, Strategies: []StrategyInfo{{"none", false}, {"redis", true}}, Faults: []string{"redis-restart", "lock-expired-early"},
		Cells: []Cell{
			{Strategy: "none", Fault: "redis-restart", Runs: 3, Kept: 0},
			{Strategy: "none", Fault: "lock-expired-early", NotStruck: "DID NOT STRIKE: 0 of 3 runs struck"},
			{Strategy: "redis", Fault: "redis-restart", Safe: true, Runs: 3, Kept: 3},
			{Strategy: "redis", Fault: "lock-expired-early", Safe: true, Runs: 3, Kept: 2, SafeBroke: true},
		}}
	var buf bytes.Buffer
	if err := renderHTML(&buf, rep, m); err != nil {
		t.Fatalf("renderHTML: %v", err)
	}
	page := buf.String()
	for _, want := range []string{`<table id="verdicts">`, `data-strategy="none"`, `data-strategy="redis"`, "1030 of 1000", "OVERSOLD", "SAFE",
		"none OVERSOLD: oversold 30 units", "720ee85abcde", "fsync on", "sku-loadtest, 1000 in stock", "1500 per row, 1 unit each, 64 at a time",
		"Sales per second over time", "Latency seen by the buyers", "Final stock and oversold units",
		"Answers per replica", "Lock breaches caught by the database", "What survives what", "lock-expired-early",
		">3/3<", ">2/3 BROKE<", `class="notstruck"`, ">DID NOT STRIKE<", "UNVERIFIED: the state before and after each run was read through the service"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if v, c := strings.Index(page, `id="verdicts"`), strings.Index(page, "Sales per second over time"); v < 0 || c < v {
		t.Errorf("the verdict table (at %d) does not come before the charts (at %d)", v, c)
	}
	if !strings.Contains(page, echartsJS[:200]) {
		t.Errorf("the report does not inline echarts")
	}
	if refs := regexp.MustCompile(`(?:src|href)="(https?:)?//[^"]*"`).FindAllString(page, -1); len(refs) > 0 {
		t.Errorf("the report loads %q from elsewhere; it must open offline", refs)
	}
}

// TestHTMLTellsSixteenRowsApart: each of 16 rows of the sales chart has
// a colour of its own and a dash; rows next to each other in the legend
// differ in dash too, and the 16 use every dash pattern.
func TestHTMLTellsSixteenRowsApart(t *testing.T) {
	colours, patterns := map[string]int{}, map[string]bool{}
	for i, name := range sixteen {
		st := lineStyle(i)
		c, dash := st["color"].(string), fmt.Sprint(st["type"])
		if j, ok := colours[c]; ok {
			t.Errorf("%s and %s share the colour %s", sixteen[j], name, c)
		}
		colours[c] = i
		patterns[dash] = true
		if i > 0 && fmt.Sprint(lineStyle(i - 1)["type"]) == dash {
			t.Errorf("%s and %s, next to each other, share the dash %s", sixteen[i-1], name, dash)
		}
	}
	if len(patterns) != len(dashes) {
		t.Errorf("16 rows use %d dash patterns, want all %d", len(patterns), len(dashes))
	}
}
