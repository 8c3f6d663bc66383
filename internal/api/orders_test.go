package api

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/redis"
	"inventory/internal/stock"
	"inventory/internal/wire"
)

// holdBody is a hold's body: quantity units of product id, to be paid
// within payWithin.
func holdBody(id string, quantity int, payWithin string) string {
	return `{"product_id":"` + id + `","quantity":` + strconv.Itoa(quantity) + `,"pay_within":"` + payWithin + `"}`
}

// hold asks POST path with body (a hold's) and returns the answer, which
// must be 201 with the order.
func (f *fixture) hold(path, body string, header ...string) (wire.HeldSale, response) {
	f.t.Helper()
	r := f.do("POST", path, jsonType, body, header...)
	var h wire.HeldSale
	if r.status != 201 {
		f.t.Fatalf("POST %s %s = %d %s, want 201 with the order", path, body, r.status, r.raw)
	}
	if err := json.Unmarshal([]byte(r.raw), &h); err != nil {
		f.t.Fatalf("POST %s %s: %v in %s", path, body, err, r.raw)
	}
	if loc := r.header.Get("Location"); loc != "/orders/"+h.OrderID {
		f.t.Errorf("POST %s %s: Location = %q, want /orders/%s", path, body, loc, h.OrderID)
	}
	return h, r
}

// order is GET /orders/{id}, which must be 200.
func (f *fixture) order(id string) wire.Order {
	f.t.Helper()
	r := f.do("GET", "/orders/"+id, "", "")
	if r.status != 200 {
		f.t.Fatalf("GET /orders/%s = %d %s, want 200", id, r.status, r.raw)
	}
	var o wire.Order
	if err := json.Unmarshal([]byte(r.raw), &o); err != nil {
		f.t.Fatalf("GET /orders/%s: %v in %s", id, err, r.raw)
	}
	return o
}

// step is POST /orders/{id}/{step}, without a body.
func (f *fixture) step(id, step string, header ...string) response {
	f.t.Helper()
	return f.do("POST", "/orders/"+id+"/"+step, "", "", header...)
}

// states is an order's history, its states alone.
func states(o wire.Order) string {
	var s []string
	for _, e := range o.History {
		s = append(s, e.State)
	}
	return strings.Join(s, " ")
}

// ordersOf counts product id's orders in Postgres.
func (f *fixture) ordersOf(id string) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE product_id = $1`, id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestAHoldAnswers201WithItsOrder: a sale with pay_within, by either
// route, takes the units as a sale does and answers 201 with the order
// (Location, state held, the deadline pay_within from now by Postgres's
// clock); GET /orders/{id} shows it; a sale without pay_within still
// answers 200 with the sale's seven members and no Location.
func TestAHoldAnswers201WithItsOrder(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-h", 5)
	before := time.Now()
	h, _ := f.hold("/sale", holdBody("sku-h", 2, "15m"))
	after := time.Now()
	round := int64(f.product("sku-h").Round)
	if h.ProductID != "sku-h" || h.Quantity != 2 || h.State != "held" || h.Remaining != 3 || h.Round != round ||
		h.Strategy != inventory.Atomic || h.Instance != "test-1" || h.SaleID <= 0 || uuid.Validate(h.OrderID) != nil {
		t.Errorf("hold = %+v, want 2 of sku-h held by atomic on test-1, 3 left, round %d, a sale id and an order id", h, round)
	}
	// One machine, one clock: Postgres's deadline is 15m after the call.
	if lo, hi := before.Add(15*time.Minute-time.Second), after.Add(15*time.Minute+time.Second); h.ExpiresAt.Before(lo) || h.ExpiresAt.After(hi) {
		t.Errorf("expires_at = %v, want 15m after the call (%v to %v)", h.ExpiresAt, lo, hi)
	}
	o := f.order(h.OrderID)
	if o.OrderID != h.OrderID || o.ProductID != "sku-h" || o.Quantity != 2 || o.State != "held" || !o.ExpiresAt.Equal(h.ExpiresAt) ||
		o.Round != round || states(o) != "held" || o.History[0].By != "test-1" {
		t.Errorf("GET /orders/%s = %+v, want the hold, held by test-1", h.OrderID, o)
	}
	byPath, _ := f.hold("/products/sku-h/sale", `{"quantity":1,"pay_within":"90s"}`)
	if byPath.Remaining != 2 || byPath.State != "held" || byPath.OrderID == h.OrderID {
		t.Errorf("hold by path = %+v, want a second order, 2 left", byPath)
	}
	if p := f.product("sku-h"); p.Quantity != 2 || p.Sales != 2 || p.Sold != 3 {
		t.Errorf("after two holds: %+v; want 2 left of 5, 3 units in 2 sales", p)
	}
	final := f.do("POST", "/sale", jsonType, `{"product_id":"sku-h","quantity":1,"pay_within":null}`)
	if final.status != 200 || len(final.body) != 7 || final.header.Get("Location") != "" || final.body["remaining"] != float64(1) {
		t.Errorf("a sale with pay_within null = %d Location=%q %s; want 200 with the sale's 7 members, as without it", final.status, final.header.Get("Location"), final.raw)
	}
}

// TestTheLifeOfAnOrder: hold → pay → ship, hold → cancel, hold → pay →
// refund through HTTP; each step answers the order, a repeat answers it
// as it is, a step its state does not allow is 409 order-state with the
// state and changes nothing; cancelled and refunded units come back and
// sell again, paid and shipped ones do not.
func TestTheLifeOfAnOrder(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-l", 3)

	shipped, _ := f.hold("/sale", holdBody("sku-l", 1, "15m"))
	for _, tc := range []struct {
		step, state, history string
	}{
		{"pay", "paid", "held paid"},
		{"pay", "paid", "held paid"}, // a repeat
		{"ship", "shipped", "held paid shipped"},
		{"ship", "shipped", "held paid shipped"},
		{"pay", "shipped", "held paid shipped"}, // paid once: a repeat, told as it is now
	} {
		r := f.step(shipped.OrderID, tc.step)
		var o wire.Order
		_ = json.Unmarshal([]byte(r.raw), &o)
		if r.status != 200 || o.State != tc.state || states(o) != tc.history || o.OrderID != shipped.OrderID {
			t.Errorf("POST /orders/%s/%s = %d %s, want 200 %s (%s)", shipped.OrderID, tc.step, r.status, r.raw, tc.state, tc.history)
		}
	}
	for _, step := range []string{"refund", "cancel"} {
		r := f.step(shipped.OrderID, step)
		if r.status != 409 || r.body["type"] != problemTypePrefix+"order-state" || r.body["state"] != "shipped" {
			t.Errorf("POST /orders/{shipped}/%s = %d %s, want 409 order-state with state shipped", step, r.status, r.raw)
		}
	}
	if p := f.product("sku-l"); p.Quantity != 2 || p.Sold != 1 {
		t.Errorf("after a shipped order: %+v, want 2 left, 1 sold", p)
	}

	// The last two units held, then one cancelled: it sells again.
	cancelled, _ := f.hold("/sale", holdBody("sku-l", 2, "15m"))
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-l","quantity":1}`); r.status != 409 {
		t.Fatalf("a sale with every unit held = %d %s, want 409 sold-out", r.status, r.raw)
	}
	for _, step := range []string{"cancel", "cancel"} {
		if r := f.step(cancelled.OrderID, step); r.status != 200 || r.body["state"] != "cancelled" {
			t.Errorf("POST /orders/{held}/%s = %d %s, want 200 cancelled", step, r.status, r.raw)
		}
	}
	if p := f.product("sku-l"); p.Quantity != 2 || p.Sold != 1 {
		t.Errorf("after the cancel: %+v, want the 2 units back", p)
	}
	for _, step := range []string{"pay", "refund", "ship"} {
		r := f.step(cancelled.OrderID, step)
		if r.status != 409 || r.body["type"] != problemTypePrefix+"order-state" || r.body["state"] != "cancelled" {
			t.Errorf("POST /orders/{cancelled}/%s = %d %s, want 409 order-state with state cancelled", step, r.status, r.raw)
		}
	}
	if o := f.order(cancelled.OrderID); states(o) != "held cancelled" {
		t.Errorf("the cancelled order's history = %q, want held cancelled", states(o))
	}

	refunded, _ := f.hold("/products/sku-l/sale", `{"quantity":2,"pay_within":"15m"}`)
	for _, step := range []string{"refund", "ship"} {
		r := f.step(refunded.OrderID, step)
		if r.status != 409 || r.body["type"] != problemTypePrefix+"order-state" || r.body["state"] != "held" ||
			!strings.Contains(r.body["detail"].(string), "it must be paid") {
			t.Errorf("POST /orders/{held}/%s = %d %s, want 409 order-state, state held, saying it must be paid", step, r.status, r.raw)
		}
	}
	for _, tc := range []struct{ step, state string }{{"pay", "paid"}, {"cancel", ""}, {"refund", "refunded"}, {"refund", "refunded"}, {"ship", ""}} {
		r := f.step(refunded.OrderID, tc.step)
		switch {
		case tc.state == "" && (r.status != 409 || r.body["type"] != problemTypePrefix+"order-state"):
			t.Errorf("POST /orders/{%s}/%s = %d %s, want 409 order-state", r.body["state"], tc.step, r.status, r.raw)
		case tc.state != "" && (r.status != 200 || r.body["state"] != tc.state):
			t.Errorf("POST /orders/{refunded}/%s = %d %s, want 200 %s", tc.step, r.status, r.raw, tc.state)
		}
	}
	if p := f.product("sku-l"); p.Quantity != 2 || p.Sold != 1 {
		t.Errorf("after the refund: %+v, want its 2 units back", p)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-l","quantity":2}`); r.status != 200 || r.body["remaining"] != float64(0) {
		t.Errorf("a sale of the 2 units the refund gave back = %d %s, want 200 leaving 0", r.status, r.raw)
	}

	m := f.do("GET", "/metrics", "", "").raw
	for _, want := range []string{
		`inventory_order_steps_total{outcome="ok",step="pay"} 4`,
		`inventory_order_steps_total{outcome="ok",step="cancel"} 2`,
		`inventory_order_steps_total{outcome="order-state",step="refund"} 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
}

// waitPastDeadline waits until Postgres's clock is past order id's
// deadline.
func (f *fixture) waitPastDeadline(id string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var past bool
		if err := f.pool.QueryRow(context.Background(), `SELECT now() > expires_at FROM orders WHERE id = $1`, id).Scan(&past); err != nil {
			f.t.Fatal(err)
		}
		if past {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("order %s still before its deadline after 10 s", id)
		}
		if err := inventory.Sleep(context.Background(), 50*time.Millisecond); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestAPaymentAfterTheDeadlineIsOrderExpired: past the deadline a payment
// is 409 order-expired (state held until the sweep, expired after it) and
// changes nothing; the sweep gives the units back once; a cancel of the
// expired order is order-state.
func TestAPaymentAfterTheDeadlineIsOrderExpired(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-x", 1)
	h, _ := f.hold("/sale", holdBody("sku-x", 1, "1s"))
	f.waitPastDeadline(h.OrderID)
	r := f.step(h.OrderID, "pay")
	if r.status != 409 || r.body["type"] != problemTypePrefix+"order-expired" || r.body["state"] != "held" ||
		!strings.Contains(r.body["detail"].(string), h.ExpiresAt.UTC().Format(time.RFC3339Nano)) {
		t.Errorf("POST /orders/{due}/pay = %d %s, want 409 order-expired, state held, naming the deadline %v", r.status, r.raw, h.ExpiresAt)
	}
	if o := f.order(h.OrderID); o.State != "held" || f.product("sku-x").Quantity != 0 {
		t.Errorf("the refused payment changed the order (%s) or the stock", o.State)
	}
	orders := stock.Orders{Store: f.store, Returns: stock.Restocker{Store: f.store, Redis: f.rdb}, Instance: "test-1"}
	if n, err := orders.Sweep(context.Background(), lock.Fence{Backend: "test", Token: 1}); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v; want the 1 due order expired", n, err)
	}
	for _, tc := range []struct{ step, problem string }{{"pay", "order-expired"}, {"cancel", "order-state"}, {"refund", "order-state"}} {
		r := f.step(h.OrderID, tc.step)
		if r.status != 409 || r.body["type"] != problemTypePrefix+tc.problem || r.body["state"] != "expired" {
			t.Errorf("POST /orders/{expired}/%s = %d %s, want 409 %s with state expired", tc.step, r.status, r.raw, tc.problem)
		}
	}
	o := f.order(h.OrderID)
	if states(o) != "held expired" || o.History[1].By != "expiry@test-1" {
		t.Errorf("the expired order's history = %+v, want held, then expired by expiry@test-1", o.History)
	}
	if p := f.product("sku-x"); p.Quantity != 1 || p.Sold != 0 {
		t.Errorf("after the expiry: %+v, want the unit back once", p)
	}
}

// TestOrderCallsRefuseBadInputsAndChangeNothing: a bad pay_within, a bad
// order id, an unknown order, an unknown step: each its problem, and
// nothing sold, held or changed. A step's body and Idempotency-Key are
// ignored.
func TestOrderCallsRefuseBadInputsAndChangeNothing(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-b", 5)
	h, _ := f.hold("/sale", holdBody("sku-b", 1, "15m"))
	before := f.product("sku-b")
	unknown := uuid.NewString()

	for _, tc := range []struct {
		name, method, path, contentType, body string
		header                                []string
		status                                int
		problem                               string
	}{
		{"pay_within not a duration", "POST", "/sale", jsonType, holdBody("sku-b", 1, "soon"), nil, 400, "bad-pay-within"},
		{"pay_within empty", "POST", "/sale", jsonType, holdBody("sku-b", 1, ""), nil, 400, "bad-pay-within"},
		{"pay_within zero", "POST", "/sale", jsonType, holdBody("sku-b", 1, "0s"), nil, 400, "bad-pay-within"},
		{"pay_within 0 without a unit", "POST", "/sale", jsonType, holdBody("sku-b", 1, "0"), nil, 400, "bad-pay-within"},
		{"pay_within below 1s", "POST", "/sale", jsonType, holdBody("sku-b", 1, "999ms"), nil, 400, "bad-pay-within"},
		{"pay_within above 24h", "POST", "/sale", jsonType, holdBody("sku-b", 1, "24h0m1s"), nil, 400, "bad-pay-within"},
		{"pay_within negative", "POST", "/sale", jsonType, holdBody("sku-b", 1, "-15m"), nil, 400, "bad-pay-within"},
		{"pay_within with a plus", "POST", "/sale", jsonType, holdBody("sku-b", 1, "+15m"), nil, 400, "bad-pay-within"},
		{"pay_within with a space", "POST", "/sale", jsonType, holdBody("sku-b", 1, "15 m"), nil, 400, "bad-pay-within"},
		{"pay_within overflowing", "POST", "/sale", jsonType, holdBody("sku-b", 1, "9999999999h"), nil, 400, "bad-pay-within"},
		{"pay_within a number", "POST", "/sale", jsonType, `{"product_id":"sku-b","quantity":1,"pay_within":900}`, nil, 400, "bad-pay-within"},
		{"pay_within true", "POST", "/sale", jsonType, `{"product_id":"sku-b","quantity":1,"pay_within":true}`, nil, 400, "bad-pay-within"},
		{"pay_within an object", "POST", "/sale", jsonType, `{"product_id":"sku-b","quantity":1,"pay_within":{"m":15}}`, nil, 400, "bad-pay-within"},
		{"path: pay_within a number", "POST", "/products/sku-b/sale", jsonType, `{"quantity":1,"pay_within":60}`, nil, 400, "bad-pay-within"},
		{"path: pay_within above 24h", "POST", "/products/sku-b/sale", jsonType, `{"quantity":1,"pay_within":"25h"}`, nil, 400, "bad-pay-within"},
		{"hold of an unknown product", "POST", "/sale", jsonType, holdBody("sku-404", 1, "15m"), nil, 404, "product-not-found"},
		{"hold of too many", "POST", "/sale", jsonType, holdBody("sku-b", 11, "15m"), nil, 400, "bad-quantity"},
		{"hold with an unknown member", "POST", "/sale", jsonType, `{"product_id":"sku-b","quantity":1,"pay_within":"15m","pay":"now"}`, nil, 400, "malformed-request"},
		{"order id not a UUID", "GET", "/orders/42", "", "", nil, 400, "bad-order-id"},
		{"order id a UUID with braces", "GET", "/orders/%7B" + unknown + "%7D", "", "", nil, 400, "bad-order-id"},
		{"unknown order", "GET", "/orders/" + unknown, "", "", nil, 404, "order-not-found"},
		{"unknown step", "POST", "/orders/" + h.OrderID + "/expire", "", "", nil, 404, "not-found"},
		{"a step of nothing", "POST", "/orders/" + h.OrderID + "/", "", "", nil, 404, "not-found"},
		{"a step read", "GET", "/orders/" + h.OrderID + "/pay", "", "", nil, 405, "method-not-allowed"},
	} {
		r := f.do(tc.method, tc.path, tc.contentType, tc.body, tc.header...)
		if r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %s %s %s = %d %s, want %d %s", tc.name, tc.method, tc.path, tc.body, r.status, r.raw, tc.status, tc.problem)
		}
	}
	for _, step := range []string{"pay", "cancel", "refund", "ship"} {
		if r := f.step("not-an-order", step); r.status != 400 || r.body["type"] != problemTypePrefix+"bad-order-id" {
			t.Errorf("POST /orders/not-an-order/%s = %d %s, want 400 bad-order-id", step, r.status, r.raw)
		}
		if r := f.step(unknown, step); r.status != 404 || r.body["type"] != problemTypePrefix+"order-not-found" {
			t.Errorf("POST /orders/{unknown}/%s = %d %s, want 404 order-not-found", step, r.status, r.raw)
		}
	}
	if after := f.product("sku-b"); after != before || f.ordersOf("sku-b") != 1 {
		t.Errorf("refused calls changed the product (%+v, was %+v) or made an order (%d orders)", after, before, f.ordersOf("sku-b"))
	}
	if o := f.order(h.OrderID); states(o) != "held" {
		t.Errorf("refused calls changed the order: %+v", o)
	}

	// A step takes no body and no key: both are ignored, however they look.
	r := f.do("POST", "/orders/"+h.OrderID+"/pay", "text/plain", "pay me", "Idempotency-Key", "not a valid key")
	if r.status != 200 || r.body["state"] != "paid" {
		t.Errorf("POST /orders/{held}/pay with a text body and a malformed key = %d %s, want 200 paid", r.status, r.raw)
	}
}

// TestAHoldIsReplayedByItsIdempotencyKey: the same key and hold again
// answers the first answer, 201 with Idempotent-Replayed, and the order's
// state now; the key of a hold used for a final sale, or the other way
// round, is 422; the units left once.
func TestAHoldIsReplayedByItsIdempotencyKey(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-k", 5)
	first, r := f.hold("/sale", holdBody("sku-k", 2, "15m"), "Idempotency-Key", "hold-1")
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the first hold says Idempotent-Replayed")
	}
	again, r := f.hold("/sale", holdBody("sku-k", 2, "15m"), "Idempotency-Key", "hold-1")
	if again != first || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the hold replayed = %+v (Idempotent-Replayed %q), want %+v replayed", again, r.header.Get("Idempotent-Replayed"), first)
	}
	if r := f.step(first.OrderID, "pay"); r.status != 200 {
		t.Fatalf("pay = %d %s", r.status, r.raw)
	}
	paid, r := f.hold("/sale", holdBody("sku-k", 2, "15m"), "Idempotency-Key", "hold-1")
	want := first
	want.State = "paid"
	if paid != want || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the hold replayed once paid = %+v, want %+v: the first answer with the state now", paid, want)
	}
	for _, tc := range []struct{ path, body, key string }{
		{"/sale", `{"product_id":"sku-k","quantity":2}`, "hold-1"},
		{"/products/sku-k/sale", `{"quantity":2}`, "hold-1"},
		{"/sale", holdBody("sku-k", 3, "15m"), "hold-1"},
	} {
		if r := f.do("POST", tc.path, jsonType, tc.body, "Idempotency-Key", tc.key); r.status != 422 || r.body["type"] != problemTypePrefix+"idempotency-key-reused" {
			t.Errorf("POST %s %s with a hold's key = %d %s, want 422 idempotency-key-reused", tc.path, tc.body, r.status, r.raw)
		}
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-k","quantity":1}`, "Idempotency-Key", "final-1"); r.status != 200 {
		t.Fatalf("a final sale = %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/products/sku-k/sale", jsonType, `{"quantity":1,"pay_within":"15m"}`, "Idempotency-Key", "final-1"); r.status != 422 {
		t.Errorf("a hold with a final sale's key = %d %s, want 422", r.status, r.raw)
	}
	byPath, r := f.hold("/products/sku-k/sale", `{"quantity":1,"pay_within":"10m"}`, "Idempotency-Key", "hold-2")
	if again, r2 := f.hold("/products/sku-k/sale", `{"quantity":1,"pay_within":"10m"}`, "Idempotency-Key", "hold-2"); again != byPath ||
		r2.header.Get("Idempotent-Replayed") != "true" || r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the hold by path replayed = %+v, want %+v replayed", again, byPath)
	}
	if p := f.product("sku-k"); p.Quantity != 1 || p.Sales != 3 || f.ordersOf("sku-k") != 2 {
		t.Errorf("after 2 holds, a sale and their replays: %+v, %d orders; want 1 left in 3 sales, 2 orders", p, f.ordersOf("sku-k"))
	}
}

// TestEverySafeStrategyHolds: a hold of 1 unit by each safe strategy this
// fixture can run (redlock, etcd and zookeeper need servers it has not),
// then its cancel: the stock is back where it was, nothing sold. The
// unsafe ones hold too (one ledger writer writes every order): a hold
// is never answered as a final sale.
func TestEverySafeStrategyHolds(t *testing.T) {
	f := newFixture(t, adminToken)
	safe := 0
	for _, info := range inventory.Strategies {
		if info.Needs != "" {
			continue
		}
		id := "sku-hold-" + info.Name
		f.restock(id, 3)
		h, _ := f.hold("/sale?strategy="+info.Name, holdBody(id, 1, "15m"), admin...)
		if h.Strategy != info.Name || h.Remaining != 2 || h.State != "held" {
			t.Errorf("%s: hold = %+v, want held by %s, 2 left", info.Name, h, info.Name)
		}
		if p := f.product(id); p.Quantity != 2 {
			t.Errorf("%s: stock while held = %d, want 2", info.Name, p.Quantity)
		}
		if r := f.step(h.OrderID, "cancel"); r.status != 200 || r.body["state"] != "cancelled" {
			t.Errorf("%s: cancel = %d %s, want 200 cancelled", info.Name, r.status, r.raw)
		}
		if p := f.product(id); p.Quantity != 3 || p.Sold != 0 {
			t.Errorf("%s: after the cancel %+v, want 3 left and nothing sold", info.Name, p)
		}
		if info.Safe {
			safe++
		}
	}
	if safe < 10 {
		t.Errorf("held by %d safe strategies, want every safe one the fixture runs (10)", safe)
	}
}

// TestAStepWaitsForTheOrdersLockAndSays503: with the order's lock held
// elsewhere past the wait, a step is 503 lock-timeout with Retry-After
// and changes nothing; once it is free, the step goes through.
func TestAStepWaitsForTheOrdersLockAndSays503(t *testing.T) {
	f := newFixture(t, adminToken, func(c *Config) {
		mutex := redislock.NewMutex(c.Redis, redislock.Options{Options: lock.Options{TTL: 5 * time.Second, Wait: 200 * time.Millisecond},
			FenceFloor: c.Store.FenceFloor(redislock.Backend)})
		t.Cleanup(mutex.Close)
		c.Orders = stock.Orders{Store: c.Store, Lock: mutex, Returns: stock.Restocker{Store: c.Store, Redis: c.Redis, Marks: c.SoldOut}, Instance: c.Instance}
	})
	f.restock("sku-w", 1)
	h, _ := f.hold("/sale", holdBody("sku-w", 1, "15m"))
	ctx := context.Background()
	if err := f.rdb.Set(ctx, redis.OrderLockKey(h.OrderID), "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	r := f.step(h.OrderID, "pay")
	if r.status != 503 || r.body["type"] != problemTypePrefix+"lock-timeout" || r.header.Get("Retry-After") == "" ||
		!strings.Contains(r.body["detail"].(string), "this order") {
		t.Errorf("POST /orders/{locked}/pay = %d Retry-After=%q %s, want 503 lock-timeout about the order, with Retry-After", r.status, r.header.Get("Retry-After"), r.raw)
	}
	if o := f.order(h.OrderID); o.State != "held" {
		t.Errorf("the timed-out step changed the order to %s", o.State)
	}
	if err := f.rdb.Del(ctx, redis.OrderLockKey(h.OrderID)).Err(); err != nil {
		t.Fatal(err)
	}
	if r := f.step(h.OrderID, "pay"); r.status != 200 || r.body["state"] != "paid" {
		t.Errorf("POST /orders/{unlocked}/pay = %d %s, want 200 paid", r.status, r.raw)
	}
	if m := f.do("GET", "/metrics", "", "").raw; !strings.Contains(m, `inventory_order_steps_total{outcome="lock-timeout",step="pay"} 1`) {
		t.Errorf("GET /metrics lacks the timed-out payment")
	}
}

// TestOrderCallsWithPostgresDownAre503: 503 unavailable with Retry-After,
// telling nothing of the backend.
func TestOrderCallsWithPostgresDownAre503(t *testing.T) {
	f := newDownFixture(t)
	id := uuid.NewString()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/orders/" + id},
		{"POST", "/orders/" + id + "/pay"},
		{"POST", "/orders/" + id + "/cancel"},
		{"POST", "/orders/" + id + "/refund"},
		{"POST", "/orders/" + id + "/ship"},
	} {
		r := f.do(tc.method, tc.path, "", "")
		if r.status != 503 || r.body["type"] != problemTypePrefix+"unavailable" || r.header.Get("Retry-After") == "" ||
			strings.Contains(r.raw, "127.0.0.1") || strings.Contains(r.raw, "refused") {
			t.Errorf("%s %s with Postgres down = %d Retry-After=%q %s, want 503 unavailable with Retry-After, no backend's words",
				tc.method, tc.path, r.status, r.header.Get("Retry-After"), r.raw)
		}
	}
}

// TestRacingStepsOnOneOrderHaveOneWinner: payments and cancels of one
// order, sent at once through HTTP with no order lock at all: one of them
// decides (Postgres's guard), every call of the winning step answers 200
// with the order in its state, every call of the losing one 409
// order-state with that state, and the units come back exactly when the
// cancel won.
func TestRacingStepsOnOneOrderHaveOneWinner(t *testing.T) {
	f := newFixture(t, adminToken) // Config.Orders nil: steps take no lock
	const orders, callers = 6, 8
	f.restock("sku-race", orders)
	paidWon := 0
	for range orders {
		h, _ := f.hold("/sale", holdBody("sku-race", 1, "15m"))
		start := make(chan struct{})
		answers := make([]response, callers)
		var done sync.WaitGroup
		for i := range callers {
			done.Go(func() {
				<-start
				answers[i] = f.step(h.OrderID, []string{"pay", "cancel"}[i%2])
			})
		}
		close(start)
		done.Wait()
		o := f.order(h.OrderID)
		winner, loser := "pay", "cancel"
		if o.State == "cancelled" {
			winner, loser = "cancel", "pay"
		} else {
			paidWon++
		}
		if states(o) != "held "+o.State || (o.State != "paid" && o.State != "cancelled") {
			t.Fatalf("order %s after racing pays and cancels: %+v, want held then paid or cancelled", h.OrderID, o)
		}
		for i, r := range answers {
			step := []string{"pay", "cancel"}[i%2]
			switch {
			case step == winner && (r.status != 200 || r.body["state"] != o.State):
				t.Errorf("%s of order %s, which %s won = %d %s, want 200 %s", step, h.OrderID, winner, r.status, r.raw, o.State)
			case step == loser && (r.status != 409 || r.body["type"] != problemTypePrefix+"order-state" || r.body["state"] != o.State):
				t.Errorf("%s of order %s, which %s won = %d %s, want 409 order-state, state %s", step, h.OrderID, winner, r.status, r.raw, o.State)
			}
		}
	}
	var returned int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM returns WHERE product_id = 'sku-race'`).Scan(&returned); err != nil {
		t.Fatal(err)
	}
	if p := f.product("sku-race"); p.Quantity != int64(orders-paidWon) || p.Sold != int64(paidWon) || returned != orders-paidWon {
		t.Errorf("after %d orders, %d paid: %+v, %d returns; want %d left, %d sold, one return per cancelled order",
			orders, paidWon, p, returned, orders-paidWon, paidWon)
	}
}
