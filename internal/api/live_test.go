package api

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"inventory/internal/testenv"
)

// TestLiveCountsTheSalesSinceACursor: GET /live lists the products and,
// given the last answer's last_sale_id, counts the sales after it by
// strategy; a bad cursor is a 400.
func TestLiveCountsTheSalesSinceACursor(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 10)
	first := f.do("GET", "/live", "", "")
	if first.status != 200 || first.body["default"] != "atomic" || len(first.body["sales_since"].(map[string]any)) != 0 {
		t.Fatalf("GET /live = %d %s, want 200 with the default and no counts", first.status, first.raw)
	}
	products := first.body["products"].([]any)
	if len(products) != 1 || products[0].(map[string]any)["product_id"] != "sku-1" || products[0].(map[string]any)["quantity"] != float64(10) {
		t.Errorf("GET /live products = %v, want sku-1 with 10", products)
	}
	for range 2 {
		f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`)
	}
	f.do("POST", "/sale?strategy=forupdate", jsonType, `{"product_id":"sku-1","quantity":1}`, admin...)
	next := f.do("GET", fmt.Sprintf("/live?since=%.0f", first.body["last_sale_id"]), "", "")
	counts := next.body["sales_since"].(map[string]any)
	if next.status != 200 || counts["atomic"] != float64(2) || counts["forupdate"] != float64(1) || len(counts) != 2 {
		t.Errorf("GET /live?since=<cursor> after 2 atomic and 1 forupdate sales = %d %s, want those counts", next.status, next.raw)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		if r := f.do("GET", "/live?since="+bad, "", ""); r.status != 400 || r.body["type"] != problemTypePrefix+"malformed-request" {
			t.Errorf("GET /live?since=%s = %d %s, want 400 malformed-request", bad, r.status, r.raw)
		}
	}
}

// TestLivePageIsServed: GET / is the live page, a self-contained HTML
// document (the browser test, in the e2e tier, checks what it shows).
func TestLivePageIsServed(t *testing.T) {
	f := newFixture(t, adminToken)
	r := f.do("GET", "/", "", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(r.raw, "/live") {
		t.Errorf("GET / = %d %q, %d bytes; want 200 text/html, a page that polls /live", r.status, r.header.Get("Content-Type"), len(r.raw))
	}
}

// TestLivePageInABrowser loads GET / in headless Chromium: it renders with
// no console error, warning or exception, shows the product's stock and the
// fleet default, and its figures move when sales happen.
func TestLivePageInABrowser(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: %v (make deps installs Debian's chromium)", err)
	}
	f := newFixture(t, adminToken)
	f.restock("sku-live", 50)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	// Every console message from the page: the target exists first, and
	// Console subscribes when it returns, before the page is loaded.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	var (
		mu       sync.Mutex
		problems []string
	)
	go func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleError || msg.Type == chromedp.ConsoleWarning || msg.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %s", msg.Type, msg.Text))
				mu.Unlock()
			}
		}
	}()
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}

	stock := chromedp.CSS(`tr[data-product="sku-live"] td.quantity`)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(stock)); err != nil {
		t.Fatalf("load the live page: %v (console: %q)", err, seen())
	}
	before, err := chromedp.Run(ctx, chromedp.Text(stock))
	if err != nil {
		t.Fatal(err)
	}
	def, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("default")))
	if err != nil {
		t.Fatal(err)
	}
	if before != "50" || def != "atomic" {
		t.Errorf("live page shows stock %q and default %q, want 50 and atomic", before, def)
	}

	// Sales after the page's first poll (it has rendered, so it holds that
	// poll's cursor): its next poll shows the stock down and a sales/s row
	// for atomic, until the poll after that empties the rates again. Each
	// figure is read by the evaluation that finds it, so no later poll can
	// take it away between seeing it and reading it.
	for range 20 {
		f.do("POST", "/sale", jsonType, `{"product_id":"sku-live","quantity":1}`)
	}
	after, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-product="sku-live"] td.quantity');
		return e && e.textContent !== "50" ? e.textContent : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page's stock did not move with the sales: %v (console: %q)", err, seen())
	}
	perSecond, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-strategy="atomic"] td.rate');
		return e ? e.textContent : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page showed no sales/s for atomic after the sales: %v (console: %q)", err, seen())
	}
	t.Logf("live page: stock %s → %s, atomic %s sales/s", before, after, perSecond)
	if after == before || perSecond == "" || perSecond == "0.0" {
		t.Errorf("after sales the page shows stock %q (was %q) and atomic at %q sales/s, want both to move", after, before, perSecond)
	}
	if p := seen(); len(p) > 0 {
		t.Errorf("the live page logged problems: %q", p)
	}
}
