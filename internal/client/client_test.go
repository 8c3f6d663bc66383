package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/internal/api"
	"inventory/internal/api/spectest"
	"inventory/internal/client"
)

// exchange is what a fake server must be asked, and what it answers.
type exchange struct {
	method, uri string // uri: the path and query as sent
	body        string // "" for none
	admin       bool   // with Authorization: Bearer tok
	key         string // the Idempotency-Key, "" for none, anyKey for any
	ifMatch     string // the If-Match, "" for none
	cache       string // the Cache-Control, "" for none

	status int
	header map[string]string
	answer string
}

// anyKey is an exchange's key when any Idempotency-Key will do, but one
// must be sent.
const anyKey = "(any)"

// fake answers each request with the exchange set for it, and records
// where the request differed from it.
type fake struct {
	mu   sync.Mutex
	want exchange
	errs []string
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	want := f.want
	body, _ := io.ReadAll(r.Body)
	check := func(what, got, want string) {
		if got != want {
			f.errs = append(f.errs, fmt.Sprintf("%s %q, want %q", what, got, want))
		}
	}
	check("method", r.Method, want.method)
	check("request URI", r.RequestURI, want.uri)
	check("body", string(body), want.body)
	auth := ""
	if want.admin {
		auth = "Bearer tok"
	}
	check("Authorization", r.Header.Get("Authorization"), auth)
	if got := r.Header.Get("Idempotency-Key"); want.key != anyKey || got == "" {
		check("Idempotency-Key", got, want.key)
	}
	check("If-Match", r.Header.Get("If-Match"), want.ifMatch)
	check("Cache-Control", r.Header.Get("Cache-Control"), want.cache)
	ct := ""
	if want.body != "" {
		ct = "application/json"
	}
	check("Content-Type", r.Header.Get("Content-Type"), ct)
	for k, v := range want.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(want.status)
	_, _ = io.WriteString(w, want.answer)
}

// ask sets the exchange for the next request and returns the differences
// the last one had.
func (f *fake) expect(e exchange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.want, f.errs = e, nil
}

func (f *fake) differences() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs
}

func newFake(t *testing.T) (*fake, string) {
	f := &fake{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// saleAnswer is a sale as the service writes it.
const saleAnswer = `{"sale_id":42,"product_id":"sku-1","quantity":2,"remaining":8,"round":3,"strategy":"redis","instance":"inventory-1"}` + "\n"

// orderID is an order's id, heldAnswer a hold of it as the service writes
// it, and heldSale that hold read.
const (
	orderID    = "3f2b5c1e-8d4a-4b6e-9c1f-2a7d5e8b9c0d"
	heldAnswer = `{"order_id":"` + orderID + `","sale_id":42,"product_id":"sku-1","quantity":2,"state":"held",` +
		`"expires_at":"2026-11-23T10:15:00.5Z","remaining":8,"round":3,"strategy":"redis","instance":"inventory-1"}` + "\n"
)

var heldSale = client.HeldSale{OrderID: orderID, SaleID: 42, ProductID: "sku-1", Quantity: 2, State: "held",
	ExpiresAt: time.Date(2026, 11, 23, 10, 15, 0, 5e8, time.UTC), Remaining: 8, Round: 3, Strategy: "redis", Instance: "inventory-1"}

// orderAnswer is the order of orderID in state as the service writes it,
// its history ending in that state; order is the same read.
func orderAnswer(state string) string {
	return `{"order_id":"` + orderID + `","product_id":"sku-1","quantity":2,"state":"` + state + `","expires_at":"2026-11-23T10:15:00.5Z","round":3,` +
		`"history":[{"state":"held","at":"2026-11-23T10:00:00.5Z","by":"inventory-1"},{"state":"` + state + `","at":"2026-11-23T10:01:00Z","by":"inventory-2"}]}` + "\n"
}

func order(state string) client.Order {
	return client.Order{OrderID: orderID, ProductID: "sku-1", Quantity: 2, State: state, ExpiresAt: time.Date(2026, 11, 23, 10, 15, 0, 5e8, time.UTC), Round: 3,
		History: []client.OrderEvent{{State: "held", At: time.Date(2026, 11, 23, 10, 0, 0, 5e8, time.UTC), By: "inventory-1"},
			{State: state, At: time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC), By: "inventory-2"}}}
}

func TestEveryCallSendsWhatTheDescriptionSaysAndReadsTheAnswer(t *testing.T) {
	f, base := newFake(t)
	admin := client.New(base, client.Options{AdminToken: "tok"})
	json := map[string]string{"Content-Type": "application/json", "X-Instance": "inventory-1"}
	start := time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name string
		call func(context.Context, *client.Client) (any, error)
		want exchange
		got  any
	}{
		{"Sell", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Sell(ctx, client.SaleRequest{ProductID: "sku-1", Quantity: 2}, client.SaleOptions{})
		}, exchange{method: "POST", uri: "/sale", body: `{"product_id":"sku-1","quantity":2}`, status: 200, header: json, answer: saleAnswer},
			client.Sale{SaleID: 42, ProductID: "sku-1", Quantity: 2, Remaining: 8, Round: 3, Strategy: "redis", Instance: "inventory-1"}},
		{"Sell naming a strategy with a key, replayed", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Sell(ctx, client.SaleRequest{ProductID: "sku-1", Quantity: 2}, client.SaleOptions{Strategy: "redis", IdempotencyKey: "k-1"})
		}, exchange{method: "POST", uri: "/sale?strategy=redis", body: `{"product_id":"sku-1","quantity":2}`, admin: true, key: "k-1",
			status: 200, header: map[string]string{"Idempotent-Replayed": "true", "X-Instance": "inventory-1"}, answer: saleAnswer},
			client.Sale{SaleID: 42, ProductID: "sku-1", Quantity: 2, Remaining: 8, Round: 3, Strategy: "redis", Instance: "inventory-1", Replayed: true}},
		{"Sell of a product id that JSON escapes", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Sell(ctx, client.SaleRequest{ProductID: "a\"b\\c\n\x01", Quantity: 1}, client.SaleOptions{})
		}, exchange{method: "POST", uri: "/sale", body: `{"product_id":"a\"b\\c\n\u0001","quantity":1}`, status: 200, answer: `{"sale_id":1}`},
			client.Sale{SaleID: 1}},
		{"SellProduct, the replica named only by X-Instance", func(ctx context.Context, c *client.Client) (any, error) {
			return c.SellProduct(ctx, "sku-1", client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{})
		}, exchange{method: "POST", uri: "/products/sku-1/sale", body: `{"quantity":1}`, status: 200,
			header: map[string]string{"X-Instance": "inventory-2"}, answer: `{"round":2,"strategy":"atomic","remaining":4}`},
			client.Sale{Round: 2, Strategy: "atomic", Remaining: 4, Instance: "inventory-2"}},
		{"SellProduct naming a strategy that the query escapes", func(ctx context.Context, c *client.Client) (any, error) {
			return c.SellProduct(ctx, "a/b", client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{Strategy: "x&y"})
		}, exchange{method: "POST", uri: "/products/a%2Fb/sale?strategy=x%26y", body: `{"quantity":1}`, admin: true, status: 200, answer: saleAnswer},
			client.Sale{SaleID: 42, ProductID: "sku-1", Quantity: 2, Remaining: 8, Round: 3, Strategy: "redis", Instance: "inventory-1"}},
		{"Hold", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Hold(ctx, client.SaleRequest{ProductID: "sku-1", Quantity: 2, PayWithin: "15m"}, client.SaleOptions{IdempotencyKey: "h-1"})
		}, exchange{method: "POST", uri: "/sale", body: `{"product_id":"sku-1","quantity":2,"pay_within":"15m"}`, key: "h-1", status: 201,
			header: map[string]string{"Location": "/orders/" + orderID, "X-Instance": "inventory-1"}, answer: heldAnswer},
			heldSale},
		{"HoldProduct naming a strategy, replayed, the replica named only by X-Instance", func(ctx context.Context, c *client.Client) (any, error) {
			return c.HoldProduct(ctx, "a/b", client.ProductSaleRequest{Quantity: 1, PayWithin: "90s"}, client.SaleOptions{Strategy: "redis"})
		}, exchange{method: "POST", uri: "/products/a%2Fb/sale?strategy=redis", body: `{"quantity":1,"pay_within":"90s"}`, admin: true, status: 201,
			header: map[string]string{"Idempotent-Replayed": "true", "X-Instance": "inventory-2"},
			answer: `{"order_id":"` + orderID + `","sale_id":7,"state":"paid","expires_at":"2026-11-23T10:00:00.123456789Z"}`},
			client.HeldSale{OrderID: orderID, SaleID: 7, State: "paid", ExpiresAt: start, Instance: "inventory-2", Replayed: true}},
		{"Order", func(ctx context.Context, c *client.Client) (any, error) { return c.Order(ctx, orderID) },
			exchange{method: "GET", uri: "/orders/" + orderID, status: 200, header: json, answer: orderAnswer("held")}, order("held")},
		{"Pay", func(ctx context.Context, c *client.Client) (any, error) { return c.Pay(ctx, orderID) },
			exchange{method: "POST", uri: "/orders/" + orderID + "/pay", status: 200, answer: orderAnswer("paid")}, order("paid")},
		{"Cancel", func(ctx context.Context, c *client.Client) (any, error) { return c.Cancel(ctx, orderID) },
			exchange{method: "POST", uri: "/orders/" + orderID + "/cancel", status: 200, answer: orderAnswer("cancelled")}, order("cancelled")},
		{"Refund", func(ctx context.Context, c *client.Client) (any, error) { return c.Refund(ctx, orderID) },
			exchange{method: "POST", uri: "/orders/" + orderID + "/refund", status: 200, answer: orderAnswer("refunded")}, order("refunded")},
		{"Ship of an id the path escapes", func(ctx context.Context, c *client.Client) (any, error) { return c.Ship(ctx, "x/y?z") },
			exchange{method: "POST", uri: "/orders/x%2Fy%3Fz/ship", status: 200, answer: orderAnswer("shipped")}, order("shipped")},
		{"Product", func(ctx context.Context, c *client.Client) (any, error) { return c.Product(ctx, "sku-1") },
			exchange{method: "GET", uri: "/products/sku-1", cache: "no-cache", status: 200, header: json,
				answer: `{"product_id":"sku-1","name":"Hot","quantity":7,"initial":10,"sold":3,"sales":2,"round":4,"version":9}`},
			client.Product{ProductID: "sku-1", Name: "Hot", Quantity: 7, Initial: 10, Sold: 3, Sales: 2, Round: 4, Version: 9}},
		{"ProductCached", func(ctx context.Context, c *client.Client) (any, error) { return c.ProductCached(ctx, "sku-1") },
			exchange{method: "GET", uri: "/products/sku-1", status: 200, header: map[string]string{"Content-Type": "application/json", "Age": "1"},
				answer: `{"product_id":"sku-1","quantity":7,"round":4}`},
			client.Product{ProductID: "sku-1", Quantity: 7, Round: 4}},
		{"Restock, created", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Restock(ctx, "sku-1", client.RestockRequest{Quantity: 10, Name: "Hot"})
		}, exchange{method: "PUT", uri: "/products/sku-1", body: `{"quantity":10,"name":"Hot"}`, admin: true, key: anyKey, status: 201,
			header: map[string]string{"Location": "/products/sku-1"},
			answer: `{"product_id":"sku-1","name":"Hot","quantity":10,"initial":10,"sold":0,"sales":0,"round":1,"version":0}`},
			client.Product{ProductID: "sku-1", Name: "Hot", Quantity: 10, Initial: 10, Round: 1}},
		{"Restock keeping the name", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Restock(ctx, "sku-1", client.RestockRequest{})
		}, exchange{method: "PUT", uri: "/products/sku-1", body: `{"quantity":0}`, admin: true, key: anyKey, status: 200, answer: `{"round":5}`},
			client.Product{Round: 5}},
		{"Restock, safe to retry", func(ctx context.Context, c *client.Client) (any, error) {
			return c.Restock(ctx, "sku-1", client.RestockRequest{Quantity: 3, IdempotencyKey: "r-1", IfRound: 4})
		}, exchange{method: "PUT", uri: "/products/sku-1", body: `{"quantity":3}`, admin: true, key: "r-1", ifMatch: `"4"`, status: 200, answer: `{"round":5}`},
			client.Product{Round: 5}},
		{"Round", func(ctx context.Context, c *client.Client) (any, error) { return c.Round(ctx, "sku-1", 3) },
			exchange{method: "GET", uri: "/products/sku-1/rounds/3", status: 200,
				answer: `{"product_id":"sku-1","round":3,"initial":10,"sold":10,"sales":9,"current":false}`},
			client.Round{ProductID: "sku-1", Round: 3, Initial: 10, Sold: 10, Sales: 9}},
		{"Holds", func(ctx context.Context, c *client.Client) (any, error) { return c.Holds(ctx, "sku-1") },
			exchange{method: "GET", uri: "/products/sku-1/holds", admin: true, status: 200,
				answer: `{"product_id":"sku-1","instance":"inventory-2","holds":[` +
					`{"strategy":"redis","fence":7,"start":"2026-11-23T10:00:00.123456789Z","end":"2026-11-23T10:00:01.123456789Z","outcome":"sold"},` +
					`{"strategy":"redis","fence":8,"start":"2026-11-23T10:00:00.123456789Z","end":null,"outcome":null}]}`},
			client.Holds{ProductID: "sku-1", Instance: "inventory-2", Holds: []client.Hold{
				{Strategy: "redis", Fence: 7, Start: start, End: start.Add(time.Second), Outcome: "sold"},
				{Strategy: "redis", Fence: 8, Start: start}}}},
		{"Strategies", func(ctx context.Context, c *client.Client) (any, error) { return c.Strategies(ctx) },
			exchange{method: "GET", uri: "/strategies", status: 200,
				answer: `[{"name":"none","description":"d","safe":false,"available":true},{"name":"etcd","description":"e","safe":true,"available":false,"needs":"INVENTORY_ETCD_ENDPOINTS"},{"name":"old","safe":true}]`},
			[]client.StrategyInfo{{Name: "none", Description: "d", Available: true},
				{Name: "etcd", Description: "e", Safe: true, Needs: "INVENTORY_ETCD_ENDPOINTS"},
				{Name: "old", Safe: true, Available: true}}},
		{"Strategy", func(ctx context.Context, c *client.Client) (any, error) { return c.Strategy(ctx) },
			exchange{method: "GET", uri: "/strategy", status: 200, answer: `{"strategy":"optimistic"}`}, "optimistic"},
		{"SetStrategy", func(ctx context.Context, c *client.Client) (any, error) { return nil, c.SetStrategy(ctx, "atomic") },
			exchange{method: "PUT", uri: "/strategy", body: `{"strategy":"atomic"}`, admin: true, status: 200, answer: `{"strategy":"atomic"}`}, nil},
		{"Healthz", func(ctx context.Context, c *client.Client) (any, error) { return c.Healthz(ctx) },
			exchange{method: "GET", uri: "/healthz", status: 200, answer: `{"status":"ok","instance":"inventory-1"}`},
			client.Health{Status: "ok", Instance: "inventory-1"}},
		{"Readyz", func(ctx context.Context, c *client.Client) (any, error) { return c.Readyz(ctx) },
			exchange{method: "GET", uri: "/readyz", status: 200, answer: `{"status":"ready","instance":"inventory-1"}`},
			client.Health{Status: "ready", Instance: "inventory-1"}},
		{"Live since a sale", func(ctx context.Context, c *client.Client) (any, error) { return c.Live(ctx, 5) },
			exchange{method: "GET", uri: "/live?since=5", status: 200,
				answer: `{"at":"2026-11-23T10:00:00.123456789Z","default":"redis","products":[{"product_id":"sku-1","name":"Hot","quantity":7,"initial":10,"round":2}],"last_sale_id":9,"sales_since":{"redis":4}}`},
			client.Live{At: start, Default: "redis", Products: []client.LiveProduct{{ProductID: "sku-1", Name: "Hot", Quantity: 7, Initial: 10, Round: 2}},
				LastSaleID: 9, SalesSince: map[string]int64{"redis": 4}}},
		{"Live without since", func(ctx context.Context, c *client.Client) (any, error) { return c.Live(ctx, -1) },
			exchange{method: "GET", uri: "/live", status: 200, answer: `{"default":"redis","products":[],"last_sale_id":9,"sales_since":{}}`},
			client.Live{Default: "redis", Products: []client.LiveProduct{}, LastSaleID: 9, SalesSince: map[string]int64{}}},
		{"Metrics", func(ctx context.Context, c *client.Client) (any, error) { return c.Metrics(ctx) },
			exchange{method: "GET", uri: "/metrics", status: 200, answer: "inventory_lock_breaches_total{strategy=\"redis\"} 2\n"},
			[]byte("inventory_lock_breaches_total{strategy=\"redis\"} 2\n")},
		{"OpenAPI", func(ctx context.Context, c *client.Client) (any, error) { return c.OpenAPI(ctx) },
			exchange{method: "GET", uri: "/openapi.yaml", status: 200, answer: "openapi: 3.1.0\n"}, []byte("openapi: 3.1.0\n")},
		{"Profile", func(ctx context.Context, c *client.Client) (any, error) { return c.Profile(ctx, "heap", 0) },
			exchange{method: "GET", uri: "/debug/pprof/heap", admin: true, status: 200, answer: "\x1f\x8b"}, []byte("\x1f\x8b")},
		{"Profile for some seconds", func(ctx context.Context, c *client.Client) (any, error) { return c.Profile(ctx, "profile", 2) },
			exchange{method: "GET", uri: "/debug/pprof/profile?seconds=2", admin: true, status: 200, answer: "x"}, []byte("x")},
	}
	for _, tt := range tests {
		f.expect(tt.want)
		got, err := tt.call(context.Background(), admin)
		if err != nil || client.StatusOf(err) != 200 {
			t.Errorf("%s = %v, want no error", tt.name, err)
			continue
		}
		for _, d := range f.differences() {
			t.Errorf("%s sent %s", tt.name, d)
		}
		if !reflect.DeepEqual(got, tt.got) {
			t.Errorf("%s = %#v, want %#v", tt.name, got, tt.got)
		}
	}
}

// Admin calls carry the token only when the client has one, and other
// calls never do.
func TestTheAdminTokenGoesWithAdminCallsAlone(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	ctx := context.Background()
	calls := func(c *client.Client) {
		_, _ = c.Sell(ctx, client.SaleRequest{ProductID: "p", Quantity: 1}, client.SaleOptions{})
		_, _ = c.Sell(ctx, client.SaleRequest{ProductID: "p", Quantity: 1}, client.SaleOptions{Strategy: "s"})
		_, _ = c.SellProduct(ctx, "p", client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{IdempotencyKey: "k"})
		_, _ = c.Hold(ctx, client.SaleRequest{ProductID: "p", Quantity: 1, PayWithin: "1m"}, client.SaleOptions{})
		_, _ = c.Pay(ctx, "o")
		_, _ = c.Restock(ctx, "p", client.RestockRequest{Quantity: 1})
		_, _ = c.Product(ctx, "p")
		_, _ = c.Holds(ctx, "p")
		_ = c.SetStrategy(ctx, "s")
		_, _ = c.Strategy(ctx)
		_, _ = c.Profile(ctx, "heap", 0)
		_, _ = c.Healthz(ctx)
	}
	for _, tc := range []struct {
		token string
		want  []string
	}{
		{"tok", []string{"POST /sale ", "POST /sale Bearer tok", "POST /products/p/sale ", "POST /sale ", "POST /orders/o/pay ", "PUT /products/p Bearer tok", "GET /products/p ",
			"GET /products/p/holds Bearer tok", "PUT /strategy Bearer tok", "GET /strategy ", "GET /debug/pprof/heap Bearer tok", "GET /healthz "}},
		{"", []string{"POST /sale ", "POST /sale ", "POST /products/p/sale ", "POST /sale ", "POST /orders/o/pay ", "PUT /products/p ", "GET /products/p ",
			"GET /products/p/holds ", "PUT /strategy ", "GET /strategy ", "GET /debug/pprof/heap ", "GET /healthz "}},
	} {
		seen = nil
		calls(client.New(srv.URL+"/", client.Options{AdminToken: tc.token}))
		if !slices.Equal(seen, tc.want) {
			t.Errorf("with admin token %q the calls sent\n%q\nwant\n%q", tc.token, seen, tc.want)
		}
	}
}

// problemStatus is the status of every problem type the description
// lists, as its table gives it.
var problemStatus = map[string]int{
	"malformed-request": 400, "bad-product-id": 400, "bad-quantity": 400, "bad-pay-within": 400, "bad-order-id": 400, "unknown-strategy": 400,
	"unauthorized": 401, "admin-disabled": 403, "product-not-found": 404, "order-not-found": 404, "not-found": 404,
	"method-not-allowed": 405, "request-timeout": 408, "sold-out": 409, "order-expired": 409, "order-state": 409, "body-too-large": 413,
	"uri-too-long": 414, "unsupported-media-type": 415, "round-moved": 412, "idempotency-key-reused": 422, "too-many-requests": 429, "internal": 500,
	"not-implemented": 501, "bad-gateway": 502, "lock-timeout": 503, "contention": 503,
	"overloaded": 503, "lock-lost": 503, "circuit-open": 503, "unavailable": 503, "canceled": 503,
	"outcome-unknown": 503, "strategy-unavailable": 503, "gateway-timeout": 504, "http-version-not-supported": 505,
}

// describedProblemTypes lists components.schemas.Problem's type enum.
func describedProblemTypes(t *testing.T) []string {
	t.Helper()
	doc, err := spectest.Load(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		types = append(types, v.(string))
	}
	return types
}

func TestEveryProblemTypeIsDecoded(t *testing.T) {
	f, base := newFake(t)
	c := client.New(base, client.Options{})
	types := describedProblemTypes(t)
	if len(types) != len(problemStatus) {
		t.Errorf("openapi.yaml lists %d problem types, this test knows %d: add the new ones to problemStatus", len(types), len(problemStatus))
	}
	for _, typ := range types {
		slug := strings.TrimPrefix(typ, client.TypePrefix)
		status, ok := problemStatus[slug]
		if !ok {
			t.Errorf("problem type %s of openapi.yaml is not in problemStatus", typ)
			continue
		}
		for _, breach := range []bool{false, true} {
			if breach && slug != "sold-out" && slug != "lock-lost" {
				continue
			}
			header := map[string]string{"Content-Type": "application/problem+json", "X-Instance": "inventory-2"}
			if status == 503 && slug != "outcome-unknown" && slug != "strategy-unavailable" {
				header["Retry-After"] = "1"
			}
			answer := `{"type":"` + typ + `","title":"Title of ` + slug + `","status":` + fmt.Sprint(status) +
				`,"detail":"What happened.","instance":"/sale","request_id":"rid-1"`
			if breach {
				answer += `,"lock_breach":true`
			}
			answer += "}\n"
			f.expect(exchange{method: "POST", uri: "/sale", body: `{"product_id":"p","quantity":1}`, status: status, header: header, answer: answer})
			sale, err := c.Sell(context.Background(), client.SaleRequest{ProductID: "p", Quantity: 1}, client.SaleOptions{})
			what := fmt.Sprintf("Sell answered %d %s (lock breach %v)", status, slug, breach)
			var p *client.Problem
			if !errors.As(err, &p) || sale != (client.Sale{}) {
				t.Errorf("%s = %+v, %v; want a *Problem", what, sale, err)
				continue
			}
			want := client.Problem{Status: status, Type: typ, Title: "Title of " + slug, Detail: "What happened.", RequestID: "rid-1",
				LockBreach: breach, InstancePath: "/sale", Instance: "inventory-2", Method: "POST", Path: "/sale", Body: answer}
			if header["Retry-After"] != "" {
				want.RetryAfter = time.Second
			}
			if *p != want {
				t.Errorf("%s = %+v, want %+v", what, *p, want)
			}
			if p.Slug() != slug {
				t.Errorf("%s: Slug() = %q, want %q", what, p.Slug(), slug)
			}
			wantMsg := fmt.Sprintf("POST /sale = %d %s: %s: What happened.", status, http.StatusText(status), slug)
			if breach {
				wantMsg += " (lock breach)"
			}
			if err.Error() != wantMsg {
				t.Errorf("%s: Error() = %q, want %q", what, err.Error(), wantMsg)
			}
			if got := client.StatusOf(err); got != status {
				t.Errorf("%s: StatusOf = %d, want %d", what, got, status)
			}
			if got, want := client.Retryable(err), status >= 500 || status == 408 || status == 429; got != want {
				t.Errorf("%s: Retryable = %v, want %v", what, got, want)
			}
		}
	}
}

// A problem that the fast reader leaves to encoding/json (an escape, a
// member of its own) reads the same; other calls than sales read problems
// too.
func TestProblemsOfEveryShapeAndCall(t *testing.T) {
	f, base := newFake(t)
	c := client.New(base, client.Options{AdminToken: "tok"})
	header := map[string]string{"Content-Type": "application/problem+json", "X-Instance": "inventory-1"}
	answer := `{"type":"urn:inventory:problem:bad-quantity","title":"Bad quantity","status":400,` +
		`"detail":"quantity must be between 1 and 100, got \"0\"","extra":{"x":[1]}}`
	f.expect(exchange{method: "PUT", uri: "/products/p", body: `{"quantity":-1}`, admin: true, key: anyKey, status: 400, header: header, answer: answer})
	_, err := c.Restock(context.Background(), "p", client.RestockRequest{Quantity: -1})
	var p *client.Problem
	if !errors.As(err, &p) || p.Slug() != "bad-quantity" || p.Detail != `quantity must be between 1 and 100, got "0"` || p.Instance != "inventory-1" || p.Method != "PUT" || p.Path != "/products/p" {
		t.Errorf("Restock answered %s = %#v, want a bad-quantity *Problem with its detail unescaped", answer, err)
	}
	for _, d := range f.differences() {
		t.Errorf("Restock sent %s", d)
	}
}

// A refused step of an order's life says the order's state; a hold and
// a sale are each refused by the other's call before anything is sent,
// and a 2xx hold whose body is not an order is ErrMalformedAnswer.
func TestOrderProblemsAndMistakes(t *testing.T) {
	f, base := newFake(t)
	c := client.New(base, client.Options{})
	ctx := context.Background()
	answer := `{"type":"urn:inventory:problem:order-state","title":"Order state does not allow this","status":409,` +
		`"detail":"The order is shipped; to refund, it must be paid. Nothing changed.","instance":"/orders/` + orderID + `/refund","request_id":"r","state":"shipped"}` + "\n"
	f.expect(exchange{method: "POST", uri: "/orders/" + orderID + "/refund", status: 409,
		header: map[string]string{"Content-Type": "application/problem+json", "X-Instance": "inventory-1"}, answer: answer})
	_, err := c.Refund(ctx, orderID)
	var p *client.Problem
	if !errors.As(err, &p) || p.Slug() != "order-state" || p.State != "shipped" || p.Status != 409 || client.Retryable(err) {
		t.Errorf("Refund answered %s = %#v, want a final order-state *Problem with state shipped", answer, err)
	}
	for _, d := range f.differences() {
		t.Errorf("Refund sent %s", d)
	}

	f.expect(exchange{method: "none"})
	if _, err := c.Sell(ctx, client.SaleRequest{ProductID: "p", Quantity: 1, PayWithin: "15m"}, client.SaleOptions{}); err == nil || client.StatusOf(err) != 0 {
		t.Errorf("Sell of a hold = %v, want an error before sending", err)
	}
	if _, err := c.SellProduct(ctx, "p", client.ProductSaleRequest{Quantity: 1, PayWithin: "15m"}, client.SaleOptions{}); err == nil || client.StatusOf(err) != 0 {
		t.Errorf("SellProduct of a hold = %v, want an error before sending", err)
	}
	if _, err := c.Hold(ctx, client.SaleRequest{ProductID: "p", Quantity: 1}, client.SaleOptions{}); err == nil || client.StatusOf(err) != 0 {
		t.Errorf("Hold without PayWithin = %v, want an error before sending", err)
	}
	if _, err := c.HoldProduct(ctx, "p", client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{}); err == nil || client.StatusOf(err) != 0 {
		t.Errorf("HoldProduct without PayWithin = %v, want an error before sending", err)
	}
	if d := f.differences(); len(d) != 0 {
		t.Errorf("a refused call reached the server: %v", d)
	}

	for _, tc := range []struct {
		status int
		answer string
	}{
		{200, saleAnswer}, // a final sale's answer: the service ignored pay_within
		{201, `{"order_id":1}`},
		{201, `{"sale_id":1}`},
	} {
		f.expect(exchange{method: "POST", uri: "/products/p/sale", body: `{"quantity":1,"pay_within":"1m"}`, status: tc.status, answer: tc.answer})
		if h, err := c.HoldProduct(ctx, "p", client.ProductSaleRequest{Quantity: 1, PayWithin: "1m"}, client.SaleOptions{}); !errors.Is(err, client.ErrMalformedAnswer) ||
			client.Retryable(err) || h != (client.HeldSale{}) {
			t.Errorf("HoldProduct answered %d %s = %+v, %v; want ErrMalformedAnswer", tc.status, tc.answer, h, err)
		}
	}
}

// Answers that are not problems still say what happened.
func TestAnswersThatAreNotProblems(t *testing.T) {
	f, base := newFake(t)
	c := client.New(base, client.Options{})
	const page = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	for _, tc := range []struct {
		status  int
		header  map[string]string
		answer  string
		wantMsg string
	}{
		{502, map[string]string{"Content-Type": "text/html"}, page, "GET /strategy = 502 Bad Gateway (not a problem): <html>\r\n<head><title>502 Bad Gateway</title>"},
		{401, map[string]string{"Content-Type": "text/plain"}, "no\n", "GET /strategy = 401 Unauthorized (not a problem): no"},
		{504, nil, "", "GET /strategy = 504 Gateway Timeout (empty body)"},
		{500, map[string]string{"Content-Type": "application/json"}, `{"error":"x"}`, `GET /strategy = 500 Internal Server Error (not a problem): {"error":"x"}`},
		{599, nil, strings.Repeat("x", 400), "GET /strategy = 599 (not a problem): " + strings.Repeat("x", 300) + "…"},
	} {
		f.expect(exchange{method: "GET", uri: "/strategy", status: tc.status, header: tc.header, answer: tc.answer})
		_, err := c.Strategy(context.Background())
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != tc.status || p.Type != "" || p.Body != tc.answer {
			t.Errorf("Strategy answered %d %.40q = %#v, want a *Problem with the status, no type and the body", tc.status, tc.answer, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.wantMsg) {
			t.Errorf("Strategy answered %d %.40q: Error() = %q, want it to start %q", tc.status, tc.answer, err.Error(), tc.wantMsg)
		}
	}
}

// A connection dropped before or during the answer, and a 2xx whose body
// is not the operation's, are errors of their own, never a *Problem.
func TestBrokenAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/products/dropped/sale":
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		case "/products/short/sale":
			conn, buf, _ := w.(http.Hijacker).Hijack()
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nX-Instance: inventory-1\r\n\r\n{\"sale_id\":")
			_ = buf.Flush()
			_ = conn.Close()
		case "/products/garbled/sale":
			w.Header().Set("X-Instance", "inventory-1")
			w.Header().Set("Idempotent-Replayed", "true")
			_, _ = io.WriteString(w, `{"sale_id":"one"}`)
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, client.Options{})
	sell := func(id string) (client.Sale, error) {
		return c.SellProduct(context.Background(), id, client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{IdempotencyKey: "k"})
	}
	var p *client.Problem

	_, err := sell("dropped")
	if err == nil || errors.As(err, &p) || !client.Retryable(err) || client.StatusOf(err) != 0 || !strings.Contains(err.Error(), srv.URL+"/products/dropped/sale") {
		t.Errorf("a sale whose connection dropped = %v, want an error naming the URL, not a *Problem, retryable", err)
	}
	_, err = sell("short")
	if err == nil || errors.As(err, &p) || !client.Retryable(err) || !strings.Contains(err.Error(), "POST /products/short/sale = 200 OK: read the answer") {
		t.Errorf("a sale whose answer was cut short = %v, want a read error, not a *Problem, retryable", err)
	}
	sale, err := sell("garbled")
	if !errors.Is(err, client.ErrMalformedAnswer) || errors.As(err, &p) || client.Retryable(err) || sale != (client.Sale{Instance: "inventory-1", Replayed: true}) {
		t.Errorf("a 2xx sale whose body is not a sale = %+v, %v; want ErrMalformedAnswer, not retryable, with the replica and the replay header", sale, err)
	}
}

func TestRetryAfter(t *testing.T) {
	f, base := newFake(t)
	c := client.New(base, client.Options{})
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0}, {"1", time.Second}, {"3600", time.Hour}, {"0", 0}, {"-1", 0}, {"1.5", 0},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0}, {"99999999999999999999", 0}, {"9999999999999", 9223372036 * time.Second},
	} {
		f.expect(exchange{method: "GET", uri: "/readyz", status: 503, header: map[string]string{"Retry-After": tc.header},
			answer: `{"type":"urn:inventory:problem:unavailable","title":"Backend unavailable","status":503,"detail":"d"}`})
		_, err := c.Readyz(context.Background())
		var p *client.Problem
		if !errors.As(err, &p) || p.RetryAfter != tc.want {
			t.Errorf("Readyz answered 503 with Retry-After %q = %#v, want RetryAfter %v", tc.header, err, tc.want)
		}
	}
}

// A buyer waits as long as the service's Retry-After asks before a retry,
// at least its own backoff, and at most MaxRetryAfter.
func TestRetryWaitHonoursRetryAfter(t *testing.T) {
	const backoff = 50 * time.Millisecond
	var r client.Retry // the defaults
	for _, tc := range []struct {
		retryAfter time.Duration
		try        int
		want       time.Duration
	}{
		{0, 0, backoff},
		{0, 2, 4 * backoff},
		{time.Second, 0, time.Second},
		{time.Second, 5, 32 * backoff},
		{time.Hour, 0, 5 * time.Second},
		{0, 1, 2 * backoff},
		{0, 300, backoff << 30},
	} {
		err := &client.Problem{Status: 503, RetryAfter: tc.retryAfter}
		if got := r.Wait(tc.try, err); got != tc.want {
			t.Errorf("Retry-After %v, try %d: Wait = %s, want %s", tc.retryAfter, tc.try, got, tc.want)
		}
	}
	if got := (client.Retry{Backoff: time.Millisecond, MaxRetryAfter: 2 * time.Millisecond}).Wait(0, &client.Problem{RetryAfter: time.Second}); got != 2*time.Millisecond {
		t.Errorf("Wait with MaxRetryAfter 2ms after Retry-After 1s = %v, want 2ms", got)
	}
	if got := r.Wait(1, errors.New("connection reset")); got != 2*backoff {
		t.Errorf("Wait(1) after no answer = %v, want the backoff %v", got, 2*backoff)
	}
}

func TestRetryDoSendsAgainUntilTheAnswerIsFinal(t *testing.T) {
	unavailable := &client.Problem{Status: 503, Type: client.TypePrefix + "lock-timeout", RetryAfter: time.Second}
	unknown := &client.Problem{Status: 503, Type: client.TypePrefix + "outcome-unknown"}
	soldOut := &client.Problem{Status: 409, Type: client.TypePrefix + "sold-out"}
	badGateway := &client.Problem{Status: 502}
	tooMany := &client.Problem{Status: 429}
	reused := &client.Problem{Status: 422}
	dropped := errors.New("connection reset by peer")
	malformed := fmt.Errorf("x: %w", client.ErrMalformedAnswer)
	sold := client.Sale{SaleID: 7}
	for _, tc := range []struct {
		name        string
		max         int
		answers     []error // nil: sold
		wantRetries int
		wantErr     error
	}{
		{"sold at once", 3, []error{nil}, 0, nil},
		{"503s, then sold", 5, []error{unavailable, unknown, nil}, 2, nil},
		{"no answer, 502, 429, then sold out", 5, []error{dropped, badGateway, tooMany, soldOut}, 3, soldOut},
		{"a 422 is final", 5, []error{dropped, reused}, 1, reused},
		{"a 2xx not read is final", 5, []error{malformed}, 0, malformed},
		{"no retry allowed", 0, []error{unavailable}, 0, unavailable},
		{"out of retries", 2, []error{unavailable, unavailable, unavailable, nil}, 2, unavailable},
	} {
		calls := 0
		r := client.Retry{Max: tc.max, Backoff: time.Nanosecond, MaxRetryAfter: time.Nanosecond}
		sale, retries, err := r.Do(context.Background(), func(context.Context) (client.Sale, error) {
			err := tc.answers[calls]
			calls++
			if err != nil {
				return client.Sale{}, err
			}
			return sold, nil
		})
		if retries != tc.wantRetries || calls != retries+1 || err != tc.wantErr || (err == nil) != (sale == sold) {
			t.Errorf("%s: Do = %+v, %d retries (%d calls), %v; want %d retries, %v", tc.name, sale, retries, calls, err, tc.wantRetries, tc.wantErr)
		}
	}

	// A buyer whose context ends while it waits keeps the answer it has.
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, retries, err := client.Retry{Max: 3}.Do(ctx, func(context.Context) (client.Sale, error) {
		calls++
		cancel()
		return client.Sale{}, unavailable
	})
	if calls != 1 || retries != 0 || err != unavailable {
		t.Errorf("Do with the context ended after the first answer = %d retries (%d calls), %v; want the first answer, no retry", retries, calls, err)
	}
}

// The default HTTP client keeps connections alive: many sales in a row
// reuse a few. An answer whose body the client left unread (a sold-out's
// problem, say) would cost its connection: every other sale here is one,
// so that would take 25 connections or more.
func TestSalesReuseConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		if r.URL.Query().Get("strategy") == "sold-out" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"type":"urn:inventory:problem:sold-out","title":"Sold out","status":409,"detail":"d"}`)
			return
		}
		_, _ = io.WriteString(w, saleAnswer)
	}))
	srv.Start()
	defer srv.Close()
	c := client.New(srv.URL, client.Options{Concurrency: 1})
	defer c.CloseIdleConnections()
	for i := range 50 {
		opts := client.SaleOptions{}
		if i%2 == 1 {
			opts.Strategy = "sold-out"
		}
		_, err := c.Sell(context.Background(), client.SaleRequest{ProductID: "sku-1", Quantity: 1}, opts)
		var p *client.Problem
		if err != nil && !(errors.As(err, &p) && p.Status == http.StatusConflict) {
			t.Fatalf("sale %d: %v", i, err)
		}
	}
	// One, but for net/http's own rule: it keeps a connection only once its
	// writer has reported the request written, and waits 50 ms for that
	// (maxWriteWaitBeforeConnReuse), which a loaded machine can miss (seen
	// once in make test: 2 connections).
	if len(conns) > 3 {
		t.Errorf("50 sales one after the other, every other one sold out, used %d connections, want 1 (at most 3)", len(conns))
	}
}

// An oversized answer is read up to a bound, and still gives a *Problem.
func TestAHugeErrorAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		bw := bufio.NewWriter(w)
		for range 1 << 20 {
			_, _ = bw.WriteString("xxxxxxxx")
		}
		_ = bw.Flush()
	}))
	defer srv.Close()
	_, err := client.New(srv.URL, client.Options{}).Sell(context.Background(), client.SaleRequest{ProductID: "p", Quantity: 1}, client.SaleOptions{})
	if p := (*client.Problem)(nil); !errors.As(err, &p) || p.Status != 502 || len(p.Body) != 64<<10 {
		t.Errorf("a sale answered 502 with 8 MiB = %.100v; want a 502 *Problem with the first 64 KiB of the body", err)
	}
}

// A default Client works when a test has replaced http.DefaultTransport
// with a RoundTripper that is not an *http.Transport, as spectest does.
func TestNewWithDefaultTransportReplaced(t *testing.T) {
	f, base := newFake(t)
	saved := http.DefaultTransport
	http.DefaultTransport = roundTripper(func(r *http.Request) (*http.Response, error) { return saved.RoundTrip(r) })
	defer func() { http.DefaultTransport = saved }()
	f.expect(exchange{method: "GET", uri: "/healthz", status: 200, answer: `{"status":"ok","instance":"i"}`})
	if h, err := client.New(base, client.Options{}).Healthz(context.Background()); err != nil || h.Status != "ok" {
		t.Errorf("Healthz() with http.DefaultTransport replaced = %+v, %v", h, err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// With LocalAddrs, each request comes from the next source address, also
// over kept-alive connections, so a gateway that limits per client address
// sees that many clients, each with its share.
func TestRequestsComeFromEachLocalAddrInTurn(t *testing.T) {
	var mu sync.Mutex
	var from []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.RemoteAddr, ":")
		mu.Lock()
		from = append(from, host)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	addrs, err := client.LoopbackSources(3)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(srv.URL, client.Options{LocalAddrs: addrs})
	for range 7 {
		if _, err := c.Healthz(context.Background()); err != nil {
			t.Fatalf("Healthz from %v: %v", addrs, err)
		}
	}
	c.CloseIdleConnections()
	if _, err := c.Healthz(context.Background()); err != nil {
		t.Fatalf("Healthz after CloseIdleConnections: %v", err)
	}
	want := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.2", "127.0.0.3"}
	if !slices.Equal(from, want) {
		t.Errorf("connections came from %v, want %v", from, want)
	}
}

func TestLoopbackSources(t *testing.T) {
	for _, tc := range []struct {
		n           int
		first, last string
	}{
		{1, "127.0.0.2", "127.0.0.2"},
		{254, "127.0.0.2", "127.0.0.255"},
		{255, "127.0.0.2", "127.0.1.0"},
		{client.MaxLoopbackSources, "127.0.0.2", "127.0.255.255"},
	} {
		got, err := client.LoopbackSources(tc.n)
		if err != nil || len(got) != tc.n || got[0].String() != tc.first || got[tc.n-1].String() != tc.last {
			t.Errorf("LoopbackSources(%d) = %d addresses from %v to %v, %v; want %d from %s to %s", tc.n, len(got), first(got), last(got), err, tc.n, tc.first, tc.last)
		}
	}
	for _, n := range []int{0, -1, client.MaxLoopbackSources + 1} {
		if _, err := client.LoopbackSources(n); err == nil {
			t.Errorf("LoopbackSources(%d) = nil error, want one", n)
		}
	}
}

func first(a []netip.Addr) any {
	if len(a) == 0 {
		return nil
	}
	return a[0]
}

func last(a []netip.Addr) any {
	if len(a) == 0 {
		return nil
	}
	return a[len(a)-1]
}
