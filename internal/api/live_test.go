package api

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
	"inventory/internal/stock"
	"inventory/internal/testenv"
	"inventory/internal/watchdog"
	"inventory/internal/wire"
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
	// The replica's own figures: 3 sales so far, then 2 sold-out refusals
	// (7 left, orders of 5).
	replica := next.body["replica"].(map[string]any)
	if replica["instance"] != "test-1" || replica["sales"] != float64(3) || len(replica["refusals"].(map[string]any)) != 0 || replica["started_at"] == "" {
		t.Errorf("GET /live replica after 3 sales = %v, want test-1 with 3 sales, no refusals, started_at", replica)
	}
	f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":5}`)
	for range 2 {
		f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":5}`)
	}
	replica = f.do("GET", "/live", "", "").body["replica"].(map[string]any)
	if refusals := replica["refusals"].(map[string]any); replica["sales"] != float64(4) || refusals["sold-out"] != float64(2) || len(refusals) != 1 {
		t.Errorf("GET /live replica after a sale and 2 sold-out answers = %v, want 4 sales and refusals {sold-out: 2}", replica)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		if r := f.do("GET", "/live?since="+bad, "", ""); r.status != 400 || r.body["type"] != problemTypePrefix+"malformed-request" {
			t.Errorf("GET /live?since=%s = %d %s, want 400 malformed-request", bad, r.status, r.raw)
		}
	}
}

// TestLiveShowsTheOrdersOfTheCurrentRound: GET /live gives each product
// its current round's orders by the state they are in now and the units
// their returns gave back (read from Postgres, up to a second old), and
// starts from zero in a new round.
func TestLiveShowsTheOrdersOfTheCurrentRound(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-o", 30)
	f.restock("sku-none", 5)
	if r := f.do("GET", "/live", "", ""); r.status != 200 || liveOrders(t, r, "sku-o") != (wire.LiveOrders{}) {
		t.Fatalf("GET /live before any order = %d %s, want sku-o with every count 0", r.status, r.raw)
	}
	f.hold("/sale", holdBody("sku-o", 1, "15m")) // stays held
	paid, _ := f.hold("/sale", holdBody("sku-o", 2, "15m"))
	f.step(paid.OrderID, "pay")
	shipped, _ := f.hold("/products/sku-o/sale", `{"quantity":3,"pay_within":"15m"}`)
	f.step(shipped.OrderID, "pay")
	f.step(shipped.OrderID, "ship")
	cancelled, _ := f.hold("/sale", holdBody("sku-o", 4, "15m"))
	f.step(cancelled.OrderID, "cancel")
	refunded, _ := f.hold("/sale", holdBody("sku-o", 5, "15m"))
	f.step(refunded.OrderID, "pay")
	f.step(refunded.OrderID, "refund")
	due, _ := f.hold("/sale", holdBody("sku-o", 6, "1s"))
	f.waitPastDeadline(due.OrderID)
	orders := stock.Orders{Store: f.store, Returns: stock.Restocker{Store: f.store, Redis: f.rdb}, Instance: "test-1"}
	if n, err := orders.Sweep(context.Background(), lock.Fence{Backend: "test", Token: 1}); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v; want the 1 due order expired", n, err)
	}
	f.do("POST", "/sale", jsonType, `{"product_id":"sku-o","quantity":1}`) // a final sale is no order

	want := wire.LiveOrders{Held: 1, Paid: 1, Shipped: 1, Cancelled: 1, Refunded: 1, Expired: 1, ReturnedUnits: 4 + 5 + 6}
	last := f.waitLiveOrders("sku-o", want)
	if got := liveOrders(t, last, "sku-none"); got != (wire.LiveOrders{}) {
		t.Errorf("GET /live: sku-none, never ordered, has orders %+v, want all 0", got)
	}
	// stock = initial - units held, paid or shipped - the final sale.
	if p := liveProduct(t, last, "sku-o"); p["quantity"] != float64(30-1-2-3-1) {
		t.Errorf("GET /live sku-o = %v, want stock %d", p, 30-1-2-3-1)
	}

	f.restock("sku-o", 10)
	f.hold("/sale", holdBody("sku-o", 1, "15m"))
	f.waitLiveOrders("sku-o", wire.LiveOrders{Held: 1}) // round 2's alone
}

// waitLiveOrders polls GET /live until it shows product id's orders as
// want (a count may be up to a second old), and returns that answer.
func (f *fixture) waitLiveOrders(id string, want wire.LiveOrders) response {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := f.do("GET", "/live", "", "")
		if r.status != 200 {
			f.t.Fatalf("GET /live = %d %s, want 200", r.status, r.raw)
		}
		got := liveOrders(f.t, r, id)
		if got == want {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("GET /live shows %s's orders as %+v after 10 s, want %+v", id, got, want)
		}
		if err := inventory.Sleep(context.Background(), 50*time.Millisecond); err != nil {
			f.t.Fatal(err)
		}
	}
}

// liveProduct is product id in GET /live's answer r.
func liveProduct(t testing.TB, r response, id string) map[string]any {
	t.Helper()
	products, _ := r.body["products"].([]any)
	for _, p := range products {
		if p := p.(map[string]any); p["product_id"] == id {
			return p
		}
	}
	t.Fatalf("GET /live = %d %s: no product %s", r.status, r.raw, id)
	return nil
}

// liveOrders is the orders of product id in GET /live's answer r.
func liveOrders(t testing.TB, r response, id string) wire.LiveOrders {
	t.Helper()
	raw, err := json.Marshal(liveProduct(t, r, id)["orders"])
	if err != nil {
		t.Fatal(err)
	}
	var o wire.LiveOrders
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("GET /live %s's orders %s: %v", id, raw, err)
	}
	return o
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
// no console error, warning or exception, shows the product's stock with
// its round and the fleet default, and its figures move when sales happen:
// the stock, the fleet's sales/s by strategy, and the replica's own sales/s
// and refusals/s by kind.
func TestLivePageInABrowser(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f := newFixture(t, adminToken)
	f.restock("sku-live", 50)
	ctx, problems := testenv.Browser(t, 90*time.Second)

	stock := chromedp.CSS(`tr[data-product="sku-live"] td.quantity`)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(stock)); err != nil {
		t.Fatalf("load the live page: %v (console: %q)", err, problems())
	}
	before, err := chromedp.Run(ctx, chromedp.Text(stock))
	if err != nil {
		t.Fatal(err)
	}
	def, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("default")))
	if err != nil {
		t.Fatal(err)
	}
	round, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-product="sku-live"] td.round`)))
	if err != nil {
		t.Fatal(err)
	}
	if before != "50" || def != "atomic" || round != "1" {
		t.Errorf("live page shows stock %q, round %q and default %q, want 50, 1 and atomic", before, round, def)
	}
	if empty, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("empty").hidden`)); err != nil || !empty {
		t.Errorf("the empty state shows beside a product (hidden %v, %v)", empty, err)
	}

	// Sales after the page's first poll (it has rendered, so it holds that
	// poll's cursor and the replica's counts): its next poll shows the
	// stock down, a sales/s row for atomic, and the replica's sales/s.
	// Each figure is read by the evaluation that finds it, so no later
	// poll can take it away between seeing it and reading it.
	for range 20 {
		f.do("POST", "/sale", jsonType, `{"product_id":"sku-live","quantity":1}`)
	}
	after, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-product="sku-live"] td.quantity');
		return e && e.textContent !== "50" ? e.textContent : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page's stock did not move with the sales: %v (console: %q)", err, problems())
	}
	perSecond, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-strategy="atomic"] td.rate');
		return e ? e.textContent : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page showed no sales/s for atomic after the sales: %v (console: %q)", err, problems())
	}
	replicaSales, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-replica="test-1"] td.sales');
		return e && parseFloat(e.textContent) > 0 ? e.textContent : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page showed no sales/s for replica test-1 after the sales: %v (console: %q)", err, problems())
	}
	t.Logf("live page: stock %s → %s, atomic %s sales/s, test-1 %s sales/s", before, after, perSecond, replicaSales)
	if after == before || perSecond == "" || perSecond == "0.0" {
		t.Errorf("after sales the page shows stock %q (was %q) and atomic at %q sales/s, want both to move", after, before, perSecond)
	}

	// Sold out: the remaining 30 units in orders of 10 (the fixture's most),
	// then refusals the replica counts as sold-out, which the page shows as
	// a rate of that kind.
	for range 3 {
		f.do("POST", "/sale", jsonType, `{"product_id":"sku-live","quantity":10}`)
	}
	for range 10 {
		f.do("POST", "/sale", jsonType, `{"product_id":"sku-live","quantity":1}`)
	}
	soldOut, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-replica="test-1"] [data-kind="sold-out"]');
		return e ? e.textContent : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page showed no sold-out refusals/s for test-1 after 10 sold-out answers: %v (console: %q)", err, problems())
	}
	t.Logf("live page: test-1 refusals %q", soldOut)

	// Orders: a hold shows as held, then, paid, as paid with nothing held;
	// a cancelled one as cancelled with its units back.
	f.restock("sku-held", 10)
	paid, _ := f.hold("/sale", holdBody("sku-held", 2, "15m"))
	cancelled, _ := f.hold("/sale", holdBody("sku-held", 3, "15m"))
	if held, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const e = document.querySelector('tr[data-product="sku-held"] td.held');
		return e && e.textContent === "2" ? e.textContent : "";
	})()`)); err != nil {
		t.Fatalf("the live page did not show sku-held's 2 held orders: %v (console: %q)", err, problems())
	} else {
		t.Logf("live page: sku-held held %s", held)
	}
	f.step(paid.OrderID, "pay")
	f.step(cancelled.OrderID, "cancel")
	cells, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
		const row = document.querySelector('tr[data-product="sku-held"]');
		if (!row) return "";
		const text = c => row.querySelector("td." + c).textContent;
		const s = ["held", "paid", "cancelled", "returned_units"].map(c => c + " " + text(c)).join(", ");
		return s === "held 0, paid 1, cancelled 1, returned_units 3" ? s : "";
	})()`))
	if err != nil {
		t.Fatalf("the live page did not show sku-held's orders paid and cancelled: %v (console: %q)", err, problems())
	}
	t.Logf("live page: sku-held %s", cells)
	if p := problems(); len(p) > 0 {
		t.Errorf("the live page logged problems: %q", p)
	}
}

// TestLivePageEmptyState: with no product at all, the live page says so
// and how to restock one, instead of an empty table, with a clean console.
func TestLivePageEmptyState(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f := newFixture(t, adminToken)
	ctx, problems := testenv.Browser(t, 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.ID("empty"))); err != nil {
		t.Fatalf("the live page shows no empty state without products: %v (console: %q)", err, problems())
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("empty")))
	if err != nil {
		t.Fatal(err)
	}
	table, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("products").hidden`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "No products yet") || !strings.Contains(text, f.url+"/products/sku-1") || !table {
		t.Errorf("empty state %q (products table hidden: %v), want it to say there are none and how to restock one at %s", text, table, f.url)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the live page logged problems: %q", p)
	}
}

// TestOversoldUnitsTakeTheMostOfTheEvidence: a round's oversold units are
// the most any evidence shows, and its circuit is open only while the
// round is current.
func TestOversoldUnitsTakeTheMostOfTheEvidence(t *testing.T) {
	round := func(current bool, initial, sold, stock int64, c *postgres.RoundCircuit) postgres.RoundStory {
		return postgres.RoundStory{Round: inventory.Round{Current: current, Initial: initial, Sold: sold}, Stock: stock, Circuit: c}
	}
	for _, tc := range []struct {
		name string
		st   postgres.RoundStory
		want int64
	}{
		{"sold out exactly", round(true, 100, 100, 0, nil), 0},
		{"half sold", round(true, 100, 50, 50, nil), 0},
		{"ledger above initial, stock 0 (lost updates)", round(true, 100, 134, 0, nil), 34},
		{"stock below zero now", round(true, 100, 100, -3, nil), 3},
		{"ended round, its ledger above initial", round(false, 100, 120, 0, nil), 20},
		{"ended round: an ended round's stock is not its own", round(false, 100, 100, -9, nil), 0},
		{"ended round, the watchdog saw the stock below zero", round(false, 100, 100, 0, &postgres.RoundCircuit{Quantity: -7, Initial: 100, Sold: 100}), 7},
		{"the watchdog saw the ledger above the initial", round(false, 100, 90, 0, &postgres.RoundCircuit{Quantity: 0, Initial: 100, Sold: 104}), 4},
		{"a ledger mismatch that sold less", round(true, 10, 2, 9, &postgres.RoundCircuit{Quantity: 9, Initial: 10, Sold: 2}), 0},
	} {
		if got := oversoldUnits(tc.st); got != tc.want {
			t.Errorf("oversoldUnits(%s: %+v) = %d, want %d", tc.name, tc.st, got, tc.want)
		}
	}
	for _, tc := range []struct {
		current, open bool
		want          string
	}{
		{true, true, wire.CircuitOpen},
		{false, true, wire.CircuitEnded},
		{true, false, wire.CircuitClosed},
		{false, false, wire.CircuitClosed},
	} {
		st := postgres.RoundStory{Round: inventory.Round{Current: tc.current}, Circuit: &postgres.RoundCircuit{Open: tc.open}}
		if got := circuitState(st); got != tc.want {
			t.Errorf("circuitState(current %v, open %v) = %q, want %q", tc.current, tc.open, got, tc.want)
		}
	}
}

// TestLiveKeepsTheStoryOfEveryRound: GET /live gives each product its
// rounds newest first, so a round that oversold stays marked oversold,
// with the strategy that sold it and the circuit the watchdog opened,
// after a restock started the next round: the circuit open while its
// round is current, closed once an admin closed it, ended once a restock
// moved on. (A real crowd of none buyers overselling through a fleet is
// TestLivePageKeepsTheStoryOfANoneRun's.)
func TestLiveKeepsTheStoryOfEveryRound(t *testing.T) {
	f := newFixture(t, adminToken)
	ctx := context.Background()
	// What none's unguarded read-check-update leaves when buyers race:
	// the ledger past the initial and the stock below zero.
	oversell := func(id string, units ...int64) {
		t.Helper()
		for _, n := range units {
			_, err := f.store.Record(ctx, inventory.Order{ProductID: id, Quantity: n}, inventory.None, "test-1",
				func(ctx context.Context, tx *postgres.SaleTx) (postgres.Decrement, error) {
					return tx.DecrementBy(ctx, n)
				})
			if err != nil {
				t.Fatalf("Record(%d of %s by none): %v", n, id, err)
			}
		}
	}
	wd := watchdog.New(f.pool, f.circuits, watchdog.Options{Instance: "test-1"})
	check := func() {
		t.Helper()
		if found, err := wd.Check(ctx); err != nil || len(found) == 0 {
			t.Fatalf("watchdog Check = %v, %v; want the oversold round found", found, err)
		}
	}

	f.restock("story-ended", 3)
	oversell("story-ended", 2, 3) // 5 of 3: stock -2
	check()
	f.restock("story-ended", 10)
	f.do("POST", "/sale", jsonType, `{"product_id":"story-ended","quantity":1}`)

	f.restock("story-closed", 4)
	oversell("story-closed", 3, 3) // 6 of 4
	check()
	if r := f.do("POST", "/products/story-closed/circuit", "", "", admin...); r.status != 200 || r.body["closed"] == nil {
		t.Fatalf("POST /products/story-closed/circuit = %d %s, want the circuit closed", r.status, r.raw)
	}

	f.restock("story-open", 2)
	oversell("story-open", 2, 1) // 3 of 2
	check()

	// A close changes no round: the last read may stand for up to a
	// second (one read serves every reader), so wait for the close.
	last := f.waitLive(func(r response) bool {
		rounds := roundsIn(t, r, "story-closed")
		return len(rounds) == 1 && rounds[0].Circuit != nil && rounds[0].Circuit.State == wire.CircuitClosed
	})

	ended := roundsIn(t, last, "story-ended")
	if len(ended) != 2 {
		t.Fatalf("GET /live story-ended rounds = %+v, want 2", ended)
	}
	if now, was := ended[0], ended[1]; now.Round != 2 || !now.Current || now.Oversold || now.Sold != 1 || now.Stock == nil || *now.Stock != 9 ||
		now.Circuit != nil || !maps.Equal(now.UnitsByStrategy, map[string]int64{inventory.Atomic: 1}) {
		t.Errorf("GET /live story-ended round 2 = %+v, want current, 1 of 10 sold by atomic, stock 9, not oversold, no circuit", now)
	} else if was.Round != 1 || was.Current || !was.Oversold || was.OversoldUnits != 2 || was.Sold != 5 || was.Initial != 3 || was.Stock != nil ||
		!maps.Equal(was.UnitsByStrategy, map[string]int64{inventory.None: 5}) || was.Circuit == nil || was.Circuit.State != wire.CircuitEnded ||
		was.Circuit.Kind != watchdog.NegativeStock || was.Circuit.Quantity != -2 || was.Circuit.OpenedBy != "test-1" || was.Circuit.ClosedAt != nil {
		t.Errorf("GET /live story-ended round 1 = %+v (circuit %+v), want 5 of 3 sold by none, oversold by 2, its circuit ended by the restock (negative_stock at -2)", was, was.Circuit)
	}
	if c := roundsIn(t, last, "story-closed")[0]; !c.Oversold || c.OversoldUnits != 2 || c.Circuit.ClosedAt == nil || c.Stock == nil || *c.Stock != -2 {
		t.Errorf("GET /live story-closed round 1 = %+v (circuit %+v), want oversold by 2, stock -2, its circuit closed with the time", c, c.Circuit)
	}
	if o := roundsIn(t, last, "story-open")[0]; !o.Current || !o.Oversold || o.OversoldUnits != 1 || o.Circuit == nil || o.Circuit.State != wire.CircuitOpen {
		t.Errorf("GET /live story-open round 1 = %+v (circuit %+v), want current, oversold by 1, circuit open", o, o.Circuit)
	}
}

// waitLive polls GET /live until ok holds for its answer (the rounds may
// be up to a second old), and returns that answer.
func (f *fixture) waitLive(ok func(response) bool) response {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := f.do("GET", "/live", "", "")
		if r.status != 200 {
			f.t.Fatalf("GET /live = %d %s, want 200", r.status, r.raw)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("GET /live did not show what the test waits for in 10 s; last answer: %s", r.raw)
		}
		if err := inventory.Sleep(context.Background(), 50*time.Millisecond); err != nil {
			f.t.Fatal(err)
		}
	}
}

// roundsIn is the rounds of product id in GET /live's answer r.
func roundsIn(t testing.TB, r response, id string) []wire.LiveRound {
	t.Helper()
	raw, err := json.Marshal(liveProduct(t, r, id)["rounds"])
	if err != nil {
		t.Fatal(err)
	}
	var rounds []wire.LiveRound
	if err := json.Unmarshal(raw, &rounds); err != nil {
		t.Fatalf("GET /live %s's rounds %s: %v", id, raw, err)
	}
	return rounds
}
