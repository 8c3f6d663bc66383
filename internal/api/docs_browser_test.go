package api

import (
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"inventory/internal/testenv"
)

// TestDocsPageInABrowser loads GET /docs from a real server in headless
// Chromium, in a laptop's window (1280×800), as a newcomer sees it: the
// page opens on the endpoints (the first operation is in the first
// screen, and no table comes before it); the problem types are a table of
// their own after the last operation, whose header cells are apart
// ("type (slug)", "status", "when", not "type (slug)statuswhen"); POST
// /sale, which needs the admin token only for ?strategy=, shows "token
// optional", not an admin call's padlock, while PUT /strategy (admin only)
// shows the padlock; and the console stays clean.
func TestDocsPageInABrowser(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f := newFixture(t, adminToken)
	ctx, problems := testenv.Browser(t, 90*time.Second)

	sale := chromedp.CSS(`#operations-sales-sell .opblock-summary`)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(f.url+"/docs"), chromedp.WaitVisible(sale)); err != nil {
		t.Fatalf("open /docs: %v (console: %q)", err, problems())
	}

	// What comes first: the first operation's summary, where it is, and
	// whether a table comes before it.
	type first struct {
		Operation   string  `json:"operation"`
		Top         float64 `json:"top"`
		Screen      float64 `json:"screen"`
		TableBefore bool    `json:"tableBefore"`
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[first](`(() => {
		const op = document.querySelector(".opblock-summary");
		const before = [...document.querySelectorAll("table")].some(t =>
			t.compareDocumentPosition(op) & Node.DOCUMENT_POSITION_FOLLOWING);
		const path = op.querySelector(".opblock-summary-path").textContent.replace(/\u200b/g, "");
		return {operation: op.querySelector(".opblock-summary-method").textContent + " " + path,
			top: op.getBoundingClientRect().top, screen: window.innerHeight, tableBefore: before};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Operation != "POST /sale" || got.Top < 0 || got.Top+40 > got.Screen || got.TableBefore {
		t.Errorf("the page opens on %+v, want POST /sale within the first screen and no table before it", got)
	}

	// The problem types: a section after every operation, its header
	// cells apart. Each gap is measured between the texts themselves.
	type table struct {
		AfterOps bool      `json:"afterOps"`
		Headers  []string  `json:"headers"`
		Gaps     []float64 `json:"gaps"`
		Rows     int       `json:"rows"`
	}
	tab, err := chromedp.Run(ctx, chromedp.Evaluate[table](`(() => {
		const t = document.querySelector("#operations-tag-problems table");
		if (!t) return {headers: [], gaps: [], rows: 0};
		const ops = document.querySelectorAll(".opblock");
		const last = ops[ops.length - 1];
		const th = [...t.querySelectorAll("thead th")];
		const box = el => { const r = document.createRange(); r.selectNodeContents(el); return r.getBoundingClientRect(); };
		const gaps = th.slice(1).map((h, i) => box(h).left - box(th[i]).right);
		return {afterOps: !!(last.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING),
			headers: th.map(h => h.textContent), gaps, rows: t.querySelectorAll("tbody tr").length};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"type (slug)", "status", "when"}; !slices.Equal(tab.Headers, want) || !tab.AfterOps || tab.Rows < 30 {
		t.Errorf("the problems table: %+v, want header cells %q, 30 rows or more, after the last operation", tab, want)
	}
	for i, gap := range tab.Gaps {
		if gap < 8 {
			t.Errorf("header cells %q and %q are %.1f px apart, want 8 or more (they read as one word)", at(tab.Headers, i), at(tab.Headers, i+1), gap)
		}
	}

	// Padlocks: an admin-only call has one; POST /sale (token optional)
	// has the optional label instead.
	auth, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => {
		const label = id => { const b = document.querySelector("#" + id + " .opblock-summary .authorization__btn");
			return b ? b.getAttribute("aria-label") + ": " + b.textContent : "none"; };
		return {sale: label("operations-sales-sell"), switch: label("operations-strategies-setStrategy"),
			live: label("operations-operations-live")};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if auth["sale"] != "authorization optional: token optional" {
		t.Errorf("POST /sale shows %q, want the optional label, not a padlock", auth["sale"])
	}
	if auth["switch"] != "authorization button unlocked: " {
		t.Errorf("PUT /strategy shows %q, want the admin padlock (unlocked: no token given)", auth["switch"])
	}
	if auth["live"] != "none" {
		t.Errorf("GET /live (public) shows %q, want nothing", auth["live"])
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the docs page logged problems: %q", p)
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
