package report

import (
	"inventory/internal/load"
	"inventory/internal/testenv"
	"inventory/internal/verdict"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestHTMLReportInABrowser opens a report of 16 strategies in headless
// Chromium, offline (file://): the verdict table comes first with a row
// per strategy, every chart with something to draw is drawn, and the
// console stays clean.
func TestHTMLReportInABrowser(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	rep := &Report{Runs: 1, LocalFleet: true, Target: "http://127.0.0.1:1", Product: "sku-loadtest", Stock: 250, Buyers: 400, Concurrency: 64,
		WorkDelay: "2ms", StartedAt: "2026-11-25T10:00:00Z"}
	for i, name := range sixteen {
		res := load.Result{Run: 1, Strategy: name, Safe: i >= 3, Initial: 250, LedgerUnits: 250, OK: 250, SoldOut: 150, Verdict: verdict.Safe,
			Timeline: []int64{int64(10 + i), int64(20 - i), 5}, LatencyMs: load.Latency{P50: float64(i), P95: float64(2 * i), P99: float64(3 * i)},
			PerReplica: map[string]int64{"inventory-1": 200, "inventory-2": 200}, Throughput: float64(100 + i)}
		if i < 3 {
			res.Verdict, res.LedgerUnits, res.Oversold, res.FinalStock = verdict.Oversold, 250+int64(i), int64(i), -int64(i)
		}
		rep.Results = append(rep.Results, res)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := WriteHTML(path, rep, nil); err != nil {
		t.Fatal(err)
	}

	ctx, problems := testenv.Browser(t, 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.ID("verdicts"))); err != nil {
		t.Fatalf("open the report: %v (console: %q)", err, problems())
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#verdicts tbody tr")].map(tr => tr.dataset.strategy + " " + tr.querySelector("td.verdict .word").textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(sixteen) {
		t.Errorf("the verdict table has %d rows, want %d: %q", len(rows), len(sixteen), rows)
	}
	for i, name := range sixteen {
		want := name + " " + rep.Results[i].Verdict
		if i >= len(rows) || rows[i] != want {
			t.Errorf("verdict row %d = %q, want %q", i+1, at(rows, i), want)
		}
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#verdicts").compareDocumentPosition(document.querySelector(".chart")) === Node.DOCUMENT_POSITION_FOLLOWING`))
	if err != nil || !first {
		t.Errorf("the verdict table does not come before the charts (%v)", err)
	}
	// echarts draws each chart into a canvas of its own once it is laid out.
	drawn, err := chromedp.Run(ctx, chromedp.Poll[int](`(() => {
		const charts = document.querySelectorAll(".chart"), canvases = document.querySelectorAll(".chart canvas");
		return charts.length > 0 && canvases.length === charts.length ? charts.length : 0;
	})()`))
	if err != nil {
		t.Fatalf("the charts were not drawn: %v (console: %q)", err, problems())
	}
	// No lock broke in this run: its chart is one line, not an empty axis.
	if drawn != 4 {
		t.Errorf("%d charts drawn, want 4", drawn)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the report logged problems: %q", p)
	}

	// The fault matrix's page (loadtest faults --html) has no charts: a
	// table whose every cell is labelled, and a clean console too.
	m := &Matrix{Runs: 1, Strategies: []StrategyInfo{{"none", false}, {"redis", true}}, Faults: []string{"replica-kill", "lock-expired-early"},
		Cells: []Cell{
			{Strategy: "none", Fault: "replica-kill", Runs: 1},
			{Strategy: "none", Fault: "lock-expired-early", NotStruck: "DID NOT STRIKE: 0 of 1 runs struck"},
			{Strategy: "redis", Fault: "replica-kill", Safe: true, Runs: 1, Kept: 1},
			{Strategy: "redis", Fault: "lock-expired-early", Safe: true, NotApplicable: "no lock"},
		}}
	path = filepath.Join(t.TempDir(), "faults.html")
	if err := WriteHTML(path, nil, m); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.ID("matrix"))); err != nil {
		t.Fatalf("open the matrix page: %v (console: %q)", err, problems())
	}
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#matrix tbody td:not(:first-child)")].map(td => td.className + " " + td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"expected 0/1", "notstruck DID NOT STRIKE", "safe 1/1", "na n/a"}; !slices.Equal(cells, want) {
		t.Errorf("matrix cells = %q, want %q", cells, want)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the matrix page logged problems: %q", p)
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
