package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/wire"
)

// Fuzz targets for what a request can carry before any backend is touched.
// `make fuzz` runs each for a while; `go test` runs their seeds (f.Add and
// testdata/fuzz/<name>/) as ordinary tests.

const fuzzAdminToken = "fuzz-admin-token"

// fuzzServer is a server with no backends: enough for readSale when the
// request names its strategy (an admin call), which needs neither Redis nor
// Postgres.
func fuzzServer() *server {
	return &server{
		Config:    Config{AdminToken: fuzzAdminToken, MaxQuantity: 10},
		adminHash: sha256.Sum256([]byte(fuzzAdminToken)),
	}
}

// saleRequestFor is POST /sale?strategy=atomic with body, as an admin.
func saleRequestFor(body []byte, contentType string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/sale?strategy="+inventory.Atomic, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	r.Header.Set("Authorization", "Bearer "+fuzzAdminToken)
	return r
}

// isProductID is the product id rule written out by hand: 1–64 characters
// of A–Z a–z 0–9 '.' '_' '-'.
func isProductID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func FuzzDecodeSale(f *testing.F) {
	for _, seed := range []struct{ body, contentType string }{
		{`{"product_id":"sku-1","quantity":1}`, "application/json"},
		{`{"product_id":"A.b_c-9","quantity":10}`, "application/json; charset=utf-8"},
		{`{"quantity":3,"product_id":"sku-1"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":0}`, "application/json"},
		{`{"product_id":"sku-1","quantity":11}`, "application/json"},
		{`{"product_id":"sku-1","quantity":-1}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1.5}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1e2}`, "application/json"},
		{`{"product_id":"sku-1","quantity":"1"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":99999999999999999999}`, "application/json"},
		{`{"product_id":"sku 1","quantity":1}`, "application/json"},
		{`{"product_id":"","quantity":1}`, "application/json"},
		{`{"product_id":"` + strings.Repeat("a", 65) + `","quantity":1}`, "application/json"},
		{`{"product_id":"sku-\u0000","quantity":1}`, "application/json"},
		{`{"product_id":null,"quantity":1}`, "application/json"},
		{`{"product_id":"sku-1"}`, "application/json"},
		{`{"quantity":1}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"extra":true}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1}{}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1} x`, "application/json"},
		{`{"product_id":"sku-1","quantity":1`, "application/json"},
		{`[]`, "application/json"},
		{`null`, "application/json"},
		{``, "application/json"},
		{"{\"product_id\":\"sku-\xff\",\"quantity\":1}", "application/json"},
		{`{"product_id":"sku-1","quantity":1}`, "text/plain"},
		{`{"product_id":"sku-1","quantity":1}`, ""},
		{`{"product_id":"sku-1","quantity":1,"pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"15m"}`, "application/json"},
		{`{"pay_within":"1h30m","product_id":"sku-1","quantity":2}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"999ms"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"24h0m0.001s"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"-15m"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"+15m"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":""}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"soon"}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":900}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":null}`, "application/json"},
		{`{"product_id":"sku-1","quantity":1,"pay_within":"1\u0035m"}`, "application/json"},
	} {
		f.Add([]byte(seed.body), seed.contentType)
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		order, strategy, err := s.readSale(httptest.NewRecorder(), saleRequestFor(body, contentType))
		if err != nil {
			if k := classify(err); k.status < 400 || k.status > 499 {
				t.Fatalf("readSale(%q, Content-Type %q) = %v, classified %d %s; want a 4xx", body, contentType, err, k.status, k.slug)
			}
			return
		}
		if strategy != inventory.Atomic {
			t.Fatalf("readSale(%q) strategy = %q, want the named %q", body, strategy, inventory.Atomic)
		}
		if !isProductID(order.ProductID) || order.Quantity < 1 || order.Quantity > s.MaxQuantity ||
			order.PayWithin != 0 && (order.PayWithin < inventory.MinPayWithin || order.PayWithin > inventory.MaxPayWithin) {
			t.Fatalf("readSale(%q) accepted %+v, which breaks the product id, quantity or pay_within rule", body, order)
		}
		var plain wire.SaleBody
		if err := json.Unmarshal(body, &plain); err != nil || plain.ProductID == nil || plain.Quantity == nil ||
			*plain.ProductID != order.ProductID || *plain.Quantity != order.Quantity || (plain.PayWithin != nil) != (order.PayWithin != 0) {
			t.Fatalf("readSale(%q) = %+v, but json.Unmarshal reads %+v, %v", body, order, plain, err)
		}
		if plain.PayWithin != nil {
			if d, err := time.ParseDuration(*plain.PayWithin); err != nil || d != order.PayWithin {
				t.Fatalf("readSale(%q) pay_within = %v, but the body's %q parses as %v, %v", body, order.PayWithin, *plain.PayWithin, d, err)
			}
		}
		// What was accepted must read back the same when sent again.
		var hold *string
		if order.PayWithin != 0 {
			d := order.PayWithin.String()
			hold = &d
		}
		again, err := json.Marshal(wire.SaleBody{ProductID: &order.ProductID, Quantity: &order.Quantity, PayWithin: hold})
		if err != nil {
			t.Fatal(err)
		}
		back, _, err := s.readSale(httptest.NewRecorder(), saleRequestFor(again, "application/json"))
		if err != nil || back != order {
			t.Fatalf("readSale(%q) = %+v, but its re-encoding %s reads as %+v, %v", body, order, again, back, err)
		}
	})
}

func FuzzIdempotencyKey(f *testing.F) {
	for _, seed := range []struct {
		key   string
		twice bool
	}{
		{"order-42", false},
		{"!", false},
		{"~", false},
		{strings.Repeat("k", maxIdempotencyKey), false},
		{strings.Repeat("k", maxIdempotencyKey+1), false},
		{"", false},
		{"with space", false},
		{"tab\there", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"é", false},
		{"order-42", true},
	} {
		f.Add(seed.key, seed.twice)
	}
	f.Fuzz(func(t *testing.T, key string, twice bool) {
		r := httptest.NewRequest(http.MethodPost, "/sale", nil)
		r.Header["Idempotency-Key"] = []string{key}
		if twice {
			r.Header["Idempotency-Key"] = append(r.Header["Idempotency-Key"], key)
		}
		got, err := idempotencyKey(r)
		want := !twice && isIdempotencyKey(key)
		switch {
		case want && (err != nil || got != key):
			t.Fatalf("idempotencyKey(%q) = %q, %v; want it accepted as it is", key, got, err)
		case !want && err == nil:
			t.Fatalf("idempotencyKey(%q, twice %v) = %q, nil; want it refused", key, twice, got)
		case !want && classify(err).status != http.StatusBadRequest:
			t.Fatalf("idempotencyKey(%q) = %v, classified %d; want 400", key, err, classify(err).status)
		}
	})
}

// isIdempotencyKey is the documented Idempotency-Key rule written out by
// hand: 1–255 visible ASCII characters (0x21–0x7e).
func isIdempotencyKey(key string) bool {
	if len(key) < 1 || len(key) > 255 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}

func FuzzRequestID(f *testing.F) {
	for _, seed := range []string{
		"req-from-client-42", "a", "A.b_c-9", strings.Repeat("x", maxRequestID), strings.Repeat("x", maxRequestID+1),
		"", "bad id", "bad\nid", "<script>", `"quoted"`, "id,other", "naïve", "nul\x00",
	} {
		f.Add(seed)
	}
	h := withRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-ID", requestID(r))
	}))
	f.Fuzz(func(t *testing.T, given string) {
		// The rule by hand: 1–64 of A–Z a–z 0–9 '.' '_' '-'. It is the product id rule.
		want := isProductID(given)
		if got := validRequestID(given); got != want {
			t.Fatalf("validRequestID(%q) = %v, want %v", given, got, want)
		}
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		r.Header["X-Request-Id"] = []string{given}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		ids := w.Result().Header.Values("X-Request-ID")
		switch {
		case len(ids) != 1:
			t.Fatalf("X-Request-ID %q: response carries %d X-Request-IDs %q, want 1", given, len(ids), ids)
		case want && ids[0] != given:
			t.Fatalf("X-Request-ID %q (valid): request id %q, want it kept", given, ids[0])
		case !want && (ids[0] == given || !isProductID(ids[0])):
			t.Fatalf("X-Request-ID %q (invalid): request id %q, want a new safe one", given, ids[0])
		}
	})
}
