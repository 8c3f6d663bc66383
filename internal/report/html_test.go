package report

import (
	"bytes"
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
	if err := renderHTML(&buf, t.TempDir(), rep, m); err != nil {
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

// TestHTMLColoursUnsafeStrategiesAsUnsafe: an unsafe strategy's row is
// coloured unsafe whatever its verdict, from its safe flag: setnx's NO
// OVERSELL says "unsafe — not caught this run", not a grey all-clear. A
// safe strategy's failure still stands out as a failure.
func TestHTMLColoursUnsafeStrategiesAsUnsafe(t *testing.T) {
	for _, c := range []struct {
		r           load.Result
		class, note string
	}{
		{load.Result{Strategy: "setnx", Verdict: verdict.NoOversell}, "unsafe", "unsafe — not caught this run"},
		{load.Result{Strategy: "none", Verdict: verdict.Oversold}, "unsafe", "unsafe — caught overselling"},
		{load.Result{Strategy: "local", Verdict: verdict.LostUpdates}, "unsafe", "unsafe — caught losing updates"},
		{load.Result{Strategy: "redis", Safe: true, Verdict: verdict.Safe}, "safe", ""},
		{load.Result{Strategy: "redis", Safe: true, Verdict: verdict.Broken}, "failed", ""},
		{load.Result{Strategy: "redis", Safe: true, Verdict: verdict.Undersold}, "undersold", ""},
	} {
		if got, note := verdictClass(c.r), unsafeNote(c.r); got != c.class || note != c.note {
			t.Errorf("%s %s (safe %v): class %q, note %q; want %q, %q", c.r.Strategy, c.r.Verdict, c.r.Safe, got, note, c.class, c.note)
		}
	}
	rep := &Report{Runs: 1, Results: []load.Result{{Run: 1, Strategy: "setnx", Verdict: verdict.NoOversell, Timeline: []int64{5}}}}
	var buf bytes.Buffer
	if err := renderHTML(&buf, t.TempDir(), rep, nil); err != nil {
		t.Fatal(err)
	}
	if want := `<td class="l unsafe">no</td><td class="verdict unsafe"><span class="word">NO OVERSELL</span><span class="why">unsafe — not caught this run</span></td>`; !strings.Contains(buf.String(), want) {
		t.Errorf("the setnx row lacks %s", want)
	}
}

// TestHTMLDrawsNoEmptyChart: a chart with nothing to draw (no lock broke,
// no row ended with stock or oversold) is one line under its title, not an
// empty axis; a chart with something to draw is drawn.
func TestHTMLDrawsNoEmptyChart(t *testing.T) {
	rep := &Report{Runs: 1, Results: []load.Result{
		{Run: 1, Strategy: "redis", Safe: true, Verdict: verdict.Safe, OK: 10, Timeline: []int64{4, 6}, LatencyMs: load.Latency{P50: 1, P95: 2, P99: 3},
			PerReplica: map[string]int64{"inventory-1": 10}},
		{Run: 1, Strategy: "atomic", Safe: true, Verdict: verdict.Safe, OK: 10, Timeline: []int64{10}, LatencyMs: load.Latency{P50: 1, P95: 2, P99: 3},
			PerReplica: map[string]int64{"inventory-2": 10}},
	}}
	var buf bytes.Buffer
	if err := renderHTML(&buf, t.TempDir(), rep, nil); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<h3>Lock breaches caught by the database</h3><p class="empty" id="chart-5">no lock breaches in this run: no answer was flagged lock_breach</p>`,
		`<h3>Final stock and oversold units</h3><p class="empty" id="chart-3">every row ended with 0 in stock and nothing oversold</p>`,
		`<div class="chart" id="chart-1"`, `<div class="chart" id="chart-2"`, `<div class="chart" id="chart-4"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, `<div class="chart" id="chart-5"`) || strings.Contains(page, `"id":"chart-5"`) {
		t.Errorf("the page draws the empty breaches chart")
	}
	rep.Results[1].Breaches = 2
	buf.Reset()
	if err := renderHTML(&buf, t.TempDir(), rep, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `<div class="chart" id="chart-5"`) {
		t.Errorf("2 breaches, and the breaches chart is not drawn")
	}
}

// TestHTMLSalesPanels: sales per second is a panel per row, each with a
// rate axis of its own (so a 190/s row is as legible as a 2,800/s one)
// and all on one time axis (so who sold out first still shows), titled
// with the row's average and peak rates, unsafe rows in the unsafe colour.
func TestHTMLSalesPanels(t *testing.T) {
	rep := &Report{Runs: 1}
	for i, name := range sixteen {
		r := load.Result{Run: 1, Strategy: name, Safe: i >= 3, OK: 250, Verdict: verdict.Safe, Timeline: []int64{19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 22, 0}}
		if name == "batch" {
			r.Timeline = []int64{280, 0}
		}
		if i < 3 {
			r.Verdict = verdict.NoOversell
		}
		rep.Results = append(rep.Results, r)
	}
	c := salesOverTime(rep)
	grids, ys, xs, titles := c.Option["grid"].([]map[string]any), c.Option["yAxis"].([]map[string]any), c.Option["xAxis"].([]map[string]any), c.Option["title"].([]map[string]any)
	if len(grids) != 16 || len(ys) != 16 || len(xs) != 16 || len(titles) != 16 {
		t.Fatalf("%d grids, %d rate axes, %d time axes, %d titles; want 16 each", len(grids), len(ys), len(xs), len(titles))
	}
	for i, y := range ys {
		if y["gridIndex"] != i || y["max"] != nil {
			t.Errorf("panel %d's rate axis %v, want its own (gridIndex %d, no fixed max)", i, y, i)
		}
		if xs[i]["max"] != xs[0]["max"] {
			t.Errorf("panel %d's time axis ends at %v, panel 0's at %v: want one time axis", i, xs[i]["max"], xs[0]["max"])
		}
	}
	if got := titles[14]["subtext"]; got != "250 sold in 0.1 s: 2,500/s on average, peak 2,800/s" {
		t.Errorf("batch's panel says %q", got)
	}
	if got := titles[3]["subtext"]; got != "250 sold in 1.3 s: 192/s on average, peak 220/s" {
		t.Errorf("redis's panel says %q", got)
	}
	if got := titles[2]; got["text"] != "setnx (unsafe)" || got["textStyle"].(map[string]any)["color"] != unsafeColour {
		t.Errorf("setnx's panel is titled %v, want setnx (unsafe) in the unsafe colour", got)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 190: "190", 2800: "2,800", -1234567: "-1,234,567", 1000: "1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
