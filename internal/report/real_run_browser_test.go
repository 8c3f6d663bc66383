package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"inventory/internal/history"
	"inventory/internal/testenv"
)

// demoRun is the report of a real run, --json of `loadtest --binary
// bin/inventory --stock 250 --buyers 400 --concurrency 64 --orders-after
// redis --hold 0.5` (make demo's settings) on a local fleet, 2026-11-29:
// 16 strategies and the orders row; none and local oversold (their
// history pages' paths made relative), setnx got away with it (NO
// OVERSELL), no lock broke, batch sold at ~2,400/s and the lock
// strategies at ~100-300/s.
const demoRun = "testdata/demo-report.json"

// TestHTMLReportOfARealRunInABrowser renders the report of a real run
// (demoRun) and reads it in headless Chromium as a newcomer would:
//   - every row's sales per second is legible: its peak stands at least
//     40% of its plot's height (one plot for all, the ~190/s lines were a
//     few pixels under batch's 2,800/s);
//   - no chart is drawn empty: the lock breaches, none in this run, are a
//     line saying so;
//   - setnx, unsafe, is coloured as unsafe like none and local, though it
//     did not oversell this run, and says "unsafe — not caught this run";
//   - the history pages are linked with a legend beside them that says
//     what "Valid LP" and "Invalid LP" are, and the page a link opens
//     carries that legend above porcupine's drawing;
//   - the console stays clean.
func TestHTMLReportOfARealRunInABrowser(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	b, err := os.ReadFile(demoRun)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", demoRun, err)
	}
	dir := t.TempDir()
	var pages []string
	for _, r := range rep.Results {
		if r.History == nil {
			continue
		}
		for i, p := range r.History.Products {
			if p.Visualization != "" {
				r.History.Products[i].Visualization = filepath.Join(dir, p.Visualization)
				pages = append(pages, r.History.Products[i].Visualization)
			}
		}
	}
	if len(pages) != 2 {
		t.Fatalf("%s has %d history pages, want none's and local's", demoRun, len(pages))
	}
	// The history pages themselves are not in the JSON: a porcupine page
	// of an oversell stands in for each, with the legend WriteHistoryPages adds.
	for _, p := range pages {
		writeOversoldHistoryPage(t, p)
	}
	path := filepath.Join(dir, "demo-report.html")
	if err := WriteHTML(path, &rep, nil); err != nil {
		t.Fatal(err)
	}

	ctx, problems := testenv.Browser(t, 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.ID("verdicts"))); err != nil {
		t.Fatalf("open the report: %v (console: %q)", err, problems())
	}

	// Sales per second: each row's peak, as a share of its plot's height.
	heights, err := chromedp.Run(ctx, chromedp.Poll[map[string]float64](`(() => {
		const el = [...document.querySelectorAll(".card h3")].find(h => h.textContent === "Sales per second over time").parentElement.querySelector(".chart");
		const chart = echarts.getInstanceByDom(el);
		if (!chart || !el.querySelector("canvas")) return null;
		const out = {};
		chart.getOption().series.forEach(s => {
			const peak = Math.max(...s.data.map(d => d[1]));
			if (!(peak > 0)) return;
			const g = s.xAxisIndex || 0;
			const rect = chart.getModel().getComponent("grid", g).coordinateSystem.getRect();
			const top = chart.convertToPixel({xAxisIndex: g, yAxisIndex: s.yAxisIndex || 0}, [0, peak])[1];
			out[s.name] = (rect.y + rect.height - top) / rect.height;
		});
		return out;
	})()`))
	if err != nil {
		t.Fatalf("the sales chart: %v (console: %q)", err, problems())
	}
	if len(heights) != len(rep.Results) {
		t.Errorf("the sales chart has %d rows with sales, want %d: %v", len(heights), len(rep.Results), heights)
	}
	for name, h := range heights {
		if h < 0.4 {
			t.Errorf("%s's peak stands %.0f%% of its plot's height, want 40%% or more to read it", name, 100*h)
		}
	}

	// No chart drawn with nothing to draw; the breaches are a line.
	empty, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".chart")].filter(el => {
		const values = echarts.getInstanceByDom(el).getOption().series.flatMap(s => s.data.map(d => Array.isArray(d) ? d[1] : d));
		return !values.some(v => v !== 0 && v !== null);
	}).map(el => el.closest(".card").querySelector("h3").textContent)`))
	if err != nil || len(empty) > 0 {
		t.Errorf("charts drawn with nothing to draw: %q (%v)", empty, err)
	}
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("p.empty")].map(p => p.textContent)`))
	if err != nil || !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "no lock breaches in this run") }) {
		t.Errorf("the empty charts' lines: %q (%v), want one saying no lock breaches in this run", lines, err)
	}

	// Unsafe is coloured as unsafe, caught or not.
	type cell struct {
		Text, Colour, Background string
	}
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]cell](`Object.fromEntries(["none", "local", "setnx", "redis"].map(name => {
		const td = document.querySelector('#verdicts tr[data-strategy="' + name + '"] td.verdict'), s = getComputedStyle(td);
		return [name, {text: td.textContent, colour: s.color, background: s.backgroundColor}];
	}))`))
	if err != nil {
		t.Fatal(err)
	}
	if c := cells["setnx"]; c.Text != "NO OVERSELLunsafe — not caught this run" || c.Colour != cells["none"].Colour || c.Background != cells["none"].Background ||
		c.Colour != cells["local"].Colour || c.Colour == cells["redis"].Colour {
		t.Errorf("setnx's verdict %+v; want it coloured as none's %+v and local's %+v (unsafe), not as redis's %+v, saying it was not caught",
			c, cells["none"], cells["local"], cells["redis"])
	}

	// The history pages: linked beside their legend.
	type links struct {
		Legend string
		Hrefs  []string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[links](`(() => {
		const card = document.getElementById("histories");
		return card ? {legend: card.querySelector("p").textContent, hrefs: [...card.querySelectorAll("a")].map(a => a.getAttribute("href"))} : {legend: "", hrefs: []};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"demo-report-none-sku-loadtest.html", "demo-report-local-sku-loadtest.html"}; !slices.Equal(got.Hrefs, want) {
		t.Errorf("history links %q, want %q (relative to the report)", got.Hrefs, want)
	}
	for _, want := range []string{"Valid LP", "Invalid LP", "linearization point", "jump to first error"} {
		if !strings.Contains(got.Legend, want) {
			t.Errorf("the legend beside the history links does not say %q: %q", want, got.Legend)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the report logged problems: %q", p)
	}
	if len(got.Hrefs) == 0 {
		return
	}

	// Follow the first link: the page opens with the legend above
	// porcupine's drawing, which is still drawn.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#histories a`)), chromedp.WaitVisible(chromedp.ID("inventory-legend"))); err != nil {
		t.Fatalf("open the first history page: %v (console: %q)", err, problems())
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[links](`(() => {
		const legend = document.getElementById("inventory-legend");
		const above = !!(legend.compareDocumentPosition(document.getElementById("legend")) & Node.DOCUMENT_POSITION_FOLLOWING);
		return {legend: above ? legend.textContent : "", hrefs: [location.pathname, String(document.querySelectorAll("#canvas svg rect").length)]};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if page.Legend != HistoryLegend || page.Hrefs[0] != pages[0] || page.Hrefs[1] == "0" {
		t.Errorf("the history page %q: legend above porcupine's %q (want HistoryLegend), %s boxes drawn", page.Hrefs[0], page.Legend, page.Hrefs[1])
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the history page logged problems: %q", p)
	}
}

// writeOversoldHistoryPage writes porcupine's page of a product of stock
// 1 that two buyers were told they bought, and adds the legend to it as
// WriteHistoryPages does.
func writeOversoldHistoryPage(t *testing.T, path string) {
	t.Helper()
	at := func(ms int) time.Time { return time.Unix(1_700_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
	ops := []history.Op{
		{Client: 0, Product: "sku-loadtest", Kind: history.Sale, Quantity: 1, Outcome: history.Sold, Remaining: 0, Start: at(0), End: at(1)},
		{Client: 1, Product: "sku-loadtest", Kind: history.Sale, Quantity: 1, Outcome: history.Sold, Remaining: -1, Start: at(2), End: at(3)},
	}
	res := history.Check(map[string]history.State{"sku-loadtest": {Stock: 1, Round: 1}}, nil, ops, history.Within(10*time.Second))
	if res.Verdict != history.NotLinearizable {
		t.Fatalf("an oversold history checks %s", res.Verdict)
	}
	if err := res.Products[0].WriteHTML(path); err != nil {
		t.Fatal(err)
	}
	if err := addHistoryLegend(path); err != nil {
		t.Fatal(err)
	}
}
