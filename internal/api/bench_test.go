package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"inventory/internal/stock"
)

// BenchmarkSoldOut is a sold-out buyer's request through the whole handler
// (middleware, decoding, the strategy's sold-out mark, the problem), in
// process: what a replica spends on each of the crowd after a sell-out.
// BenchmarkHealthz beside it is the cheapest request the handler serves;
// the load tester compares the two rates through nginx.
func BenchmarkSoldOut(b *testing.B) {
	// As cmd/inventory wires a safe strategy: its seller behind the
	// replica's sold-out memory.
	f := newFixture(b, adminToken, func(cfg *Config) {
		cfg.SoldOut = stock.NewSoldOut(time.Minute, cfg.Store, "bench")
		cfg.Sellers[stock.Atomic] = cfg.SoldOut.Wrap(cfg.Sellers[stock.Atomic])
	})
	f.restock("bench-sold-out", 1)
	sell := func() int {
		req := httptest.NewRequest(http.MethodPost, "/sale?strategy=atomic", strings.NewReader(`{"product_id":"bench-sold-out","quantity":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := sell(); code != http.StatusOK {
		b.Fatalf("the one unit: %d", code)
	}
	// The first 409 reads the stock and marks the product sold out.
	if code := sell(); code != http.StatusConflict {
		b.Fatalf("after the sell-out: %d, want 409", code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if code := sell(); code != http.StatusConflict {
			b.Fatalf("sold out: %d, want 409", code)
		}
	}
}

func BenchmarkHealthz(b *testing.B) {
	f := newFixture(b, adminToken)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("healthz: %d", rec.Code)
		}
	}
}
