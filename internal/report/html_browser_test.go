package report

import (
	"inventory/internal/load"
	"inventory/internal/testenv"
	"inventory/internal/verdict"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestHTMLReportInABrowser opens a report of 16 strategies in headless
// Chromium, offline (file://): the verdict table comes first with a row
// per strategy, every chart is drawn, and the console stays clean.
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
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#verdicts tbody tr")].map(tr => tr.dataset.strategy + " " + tr.querySelector("td.verdict").textContent)`))
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
	if drawn != 5 {
		t.Errorf("%d charts drawn, want 5", drawn)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the report logged problems: %q", p)
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
