package api_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"inventory/internal/client"
	"inventory/internal/fleet"
	"inventory/internal/inventory"
	"inventory/internal/testenv"
)

// TestLivePageKeepsTheStoryOfANoneRun is what a newcomer sees on the live
// page of a real fleet (two replicas behind nginx) in headless Chromium,
// read from the DOM's data-* hooks: while the page warms up, no replica
// looks down; a crowd of buyers naming ?strategy=none oversells a product,
// and the page shows none selling beside the fleet default, which it is
// not; the refusals that follow are named as problem types; after the run
// (a restock started the next round) a freshly loaded page still marks the
// oversold round oversold, sold by none, with the circuit the watchdog
// opened and the restock ended; and a killed replica, unlike a starting
// one, looks unreachable.
//
// LIVE_PAGE_SCREENSHOT=file.png saves the page after the run (the picture
// in docs/ comes from it).
func TestLivePageKeepsTheStoryOfANoneRun(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx := context.Background()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	const token, id = "live-token", "sku-none-story"
	f, err := fleet.Start(startCtx, fleet.Options{Replicas: 2, NoFsync: true, NoLockServices: true, NoLimits: true, AdminToken: token,
		// Widens none's read-check-update, so that the crowd oversells.
		Env: map[string]string{"INVENTORY_WORK_DELAY": "2ms"}})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	admin := client.New(f.URL, client.Options{AdminToken: token, Concurrency: 64})
	def, err := admin.Strategy(ctx)
	if err != nil || def == inventory.None {
		t.Fatalf("GET /strategy = %q, %v; want a fleet default other than none", def, err)
	}
	if _, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 100}); err != nil {
		t.Fatalf("restock %s: %v", id, err)
	}

	browser, problems := testenv.Browser(t, 3*time.Minute)
	if err := chromedp.Do(browser, chromedp.EmulateViewport(1200, 900), chromedp.Navigate(f.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-replica]`))); err != nil {
		t.Fatalf("load the live page: %v (console: %q)", err, problems())
	}
	// Warming up: a replica heard from once has no rates yet. Its row says
	// so in a neutral style, not as a replica down.
	first, err := chromedp.Run(browser, chromedp.Evaluate[string](`(() => {
		const r = document.querySelector("tr[data-replica]");
		return r.dataset.state + " " + r.className + " | " + r.textContent;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if state, _, _ := strings.Cut(first, " "); (state != "pending" && state != "starting") || strings.Contains(first, "unreachable") {
		t.Errorf("the first replica row = %q, want it pending or starting, in a neutral style", first)
	}
	t.Logf("live page, first replica row: %s", first)

	// The crowd: none's buyers until the product is oversold.
	var oversold bool
	for attempt := 0; attempt < 5 && !oversold; attempt++ {
		crowd(ctx, admin, id, 64, 400)
		p, err := admin.Product(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		oversold = p.Quantity < 0 || p.Sold > p.Initial
		t.Logf("crowd %d of none buyers: stock %d, %d sold of %d", attempt+1, p.Quantity, p.Sold, p.Initial)
	}
	if !oversold {
		t.Fatalf("5 crowds of none buyers did not oversell %s", id)
	}

	// Selling now: none, beside the fleet default, which is not none.
	strategies, err := chromedp.Run(browser, chromedp.Poll[string](`(() => {
		const s = document.querySelector('[data-selling-strategy="none"]');
		return s ? document.getElementById("default").textContent + " | " + s.textContent + " | " +
			!document.getElementById("strategy-note").hidden : "";
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("the live page never showed none selling: %v (console: %q)", err, problems())
	}
	parts := strings.Split(strategies, " | ")
	if len(parts) != 3 || parts[0] != def || parts[0] == inventory.None || !strings.HasPrefix(parts[1], "none ") || parts[2] != "true" {
		t.Errorf("the live page shows default | selling | note = %q, want %s | none <rate> | true", strategies, def)
	}
	t.Logf("live page, default | selling now | note shown: %s", strategies)

	// The watchdog opens the oversold round's circuit: the page marks the
	// round oversold and its circuit open; sales are then refused as
	// circuit-open, which the replicas' rows name as a problem type.
	round, err := chromedp.Run(browser, chromedp.Poll[string](`(() => {
		const r = document.querySelector('tr[data-round-product="`+id+`"][data-round="1"]');
		return r && r.dataset.oversold === "true" && r.dataset.circuit === "open" ? r.textContent : "";
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("the live page never marked round 1 of %s oversold with its circuit open: %v (console: %q)", id, err, problems())
	}
	t.Logf("live page, round 1 during the run: %s", round)
	// A replica refuses from its copy of the open circuits, which its
	// watchdog refreshes every second: until then it answers sold-out (the
	// stock is below zero).
	for circuitOpen, tries := 0, 0; circuitOpen < 10; tries++ {
		if tries == 500 {
			t.Fatalf("500 sales of %s with its circuit open got %d circuit-open answers, want 10", id, circuitOpen)
		}
		_, err := admin.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{})
		var p *client.Problem
		switch {
		case errors.As(err, &p) && p.Type == "urn:inventory:problem:circuit-open":
			circuitOpen++
		case errors.As(err, &p) && p.Type == "urn:inventory:problem:sold-out":
		default:
			t.Fatalf("a sale of %s with its circuit open = %v, want 503 circuit-open (or 409 sold-out)", id, err)
		}
	}
	refusals, err := chromedp.Run(browser, chromedp.Poll[string](`(() => {
		const k = document.querySelector('tr[data-replica] [data-kind="circuit-open"]');
		if (!k) return "";
		const heading = [...document.querySelectorAll("#replicas th")].map(th => th.textContent).join(" | ");
		return k.dataset.problemType + " | " + k.textContent + " | " + heading;
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("the live page showed no circuit-open refusals: %v (console: %q)", err, problems())
	}
	if !strings.HasPrefix(refusals, "urn:inventory:problem:circuit-open | circuit-open ") || !strings.Contains(refusals, "refusals (problem types)") {
		t.Errorf("the live page's refusals = %q, want a circuit-open problem type under the heading refusals (problem types)", refusals)
	}
	t.Logf("live page, refusals: %s", refusals)
	// No refusal cell reads like a strategy's name.
	kinds, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#replicas td.kinds")].map(td => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		for _, name := range inventory.Names() {
			if strings.TrimSpace(k) == name {
				t.Errorf("a refusals cell reads %q, a strategy's name", k)
			}
		}
	}

	// After the run: a restock starts round 2; a page loaded now still
	// tells round 1 oversold, by none, its circuit ended by the restock.
	if _, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 100}); err != nil {
		t.Fatalf("restock %s: %v", id, err)
	}
	if err := chromedp.Do(browser, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-round-product="`+id+`"][data-round="2"]`))); err != nil {
		t.Fatalf("reload the live page: %v (console: %q)", err, problems())
	}
	after, err := chromedp.Run(browser, chromedp.Evaluate[string](`(() => {
		const row = n => document.querySelector('tr[data-round-product="`+id+`"][data-round="' + n + '"]');
		const r1 = row(1), r2 = row(2), badge = document.querySelector('tr[data-product="`+id+`"] [data-oversold-rounds]');
		const by = [...r1.querySelectorAll("[data-round-strategy]")].map(c => c.dataset.roundStrategy).join(",");
		return [r1.dataset.oversold, r1.dataset.circuit, by, r1.querySelector("td.oversold").textContent,
			r2.dataset.current, r2.dataset.oversold, r2.dataset.circuit, badge ? badge.textContent : "no badge"].join(" | ");
	})()`))
	if err != nil {
		t.Fatalf("read the rounds after the run: %v (console: %q)", err, problems())
	}
	got := strings.Split(after, " | ")
	if len(got) != 8 || got[0] != "true" || got[1] != "ended" || got[2] != "none" || !strings.HasPrefix(got[3], "OVERSOLD by ") ||
		got[4] != "true" || got[5] != "false" || got[6] != "none" || got[7] != "1 round oversold" {
		t.Errorf("after the run the live page shows round 1 oversold | circuit | by | cell | round 2 current | oversold | circuit | badge = %q, "+
			"want true | ended | none | OVERSOLD by … | true | false | none | 1 round oversold", after)
	}
	t.Logf("live page after the run: %s", after)

	// A replica killed stops answering: its row turns unreachable, the
	// other stays live. (Once the reloaded page has heard from both: a
	// page knows a replica only from its answers.)
	gone := f.Replicas[1].Instance
	if _, err := chromedp.Run(browser, chromedp.Poll[bool](`document.querySelectorAll("tr[data-replica]").length === 2`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the reloaded live page never heard from both replicas: %v (console: %q)", err, problems())
	}
	if path := os.Getenv("LIVE_PAGE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(browser, chromedp.FullScreenshot(100)) // 100: a PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the live page logged problems: %q", p)
	}
	if err := f.Replicas[1].Kill(); err != nil {
		t.Fatalf("kill %s: %v", gone, err)
	}
	states, err := chromedp.Run(browser, chromedp.Poll[string](`(() => {
		const rows = [...document.querySelectorAll("tr[data-replica]")];
		const gone = rows.find(r => r.dataset.replica === "`+gone+`");
		if (!gone || gone.dataset.state !== "unreachable") return "";
		return rows.map(r => r.dataset.replica + " " + r.dataset.state + " " + r.className).join(" | ");
	})()`, chromedp.WithPollingTimeout(40*time.Second)))
	if err != nil {
		rows, _ := chromedp.Run(context.WithoutCancel(browser), chromedp.Evaluate[string](`[...document.querySelectorAll("tr[data-replica]")].map(r => r.dataset.state + " " + r.textContent).join(" | ") + " / " + document.getElementById("updated").textContent + document.getElementById("error").textContent`))
		t.Fatalf("the live page never showed the killed %s unreachable: %v (rows: %s; console: %q)", gone, err, rows, problems())
	}
	// The other is live, or starting if it started less than 15 s ago.
	if states != f.Replicas[0].Instance+" live  | "+gone+" unreachable unreachable" &&
		states != f.Replicas[0].Instance+" starting warming | "+gone+" unreachable unreachable" {
		t.Errorf("replica rows after killing %s = %q, want %s live (or starting), %s unreachable", gone, states, f.Replicas[0].Instance, gone)
	}
	t.Logf("live page, replicas after the kill: %s", states)
}

// crowd sends buyers sales of one unit of id naming ?strategy=none, from
// workers at once.
func crowd(ctx context.Context, c *client.Client, id string, workers, buyers int) {
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range next {
				_, _ = c.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{Strategy: inventory.None})
			}
		})
	}
	for range buyers {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
}
