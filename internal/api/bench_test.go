package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"inventory/internal/inventory"
	"inventory/internal/stock"
	"inventory/internal/tracing"
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
		cfg.Sellers[inventory.Atomic] = cfg.SoldOut.Wrap(cfg.Sellers[inventory.Atomic])
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

// BenchmarkSale sells one unit of a large stock with the redis strategy
// (lock, fenced transaction, commit), tracing off and on (every span
// batched to an exporter that drops them): what tracing costs a sale.
func BenchmarkSale(b *testing.B) {
	for _, traced := range []bool{false, true} {
		b.Run(map[bool]string{false: "untraced", true: "traced"}[traced], func(b *testing.B) {
			if traced {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				tracing.Install(tp)
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()); tracing.Install(noop.NewTracerProvider()) })
			}
			f := newFixture(b, adminToken, func(c *Config) { c.Tracing = traced })
			f.restock("bench-sale", 1_000_000_000)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/sale?strategy=redis", strings.NewReader(`{"product_id":"bench-sale","quantity":1}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+adminToken)
				rec := httptest.NewRecorder()
				f.handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("sale: %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
