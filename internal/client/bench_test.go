package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"inventory/internal/client"
)

// BenchmarkBuy is one buyer's sale as the load tester sends it, answered
// as the service answers: sold, or sold out (the crowd after a sell-out).
// The fake server runs in the same process: its cost is in the figures.
// GET /healthz is beside them, the answer the budgets divide by: the
// load tester's own CPU per answer weighs on a sold-out phase measured on
// the fleet's cores.
func BenchmarkBuy(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Instance", "inventory-1")
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"ok","instance":"inventory-1"}`+"\n")
			return
		}
		if r.URL.Query().Get("strategy") == "sold-out" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"type":"urn:inventory:problem:sold-out","title":"Sold out","status":409,`+
				`"detail":"Fewer units are left than this order asks for; nothing was sold.","instance":"/sale","request_id":"0123456789abcdef0123456789abcdef"}`+"\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"sale_id":42,"product_id":"sku-1","quantity":1,"remaining":8,"round":3,"strategy":"redis","instance":"inventory-1"}`+"\n")
	}))
	defer srv.Close()
	c := client.New(srv.URL, client.Options{AdminToken: "tok", Concurrency: 1})
	defer c.CloseIdleConnections()
	ctx := context.Background()
	order := client.SaleRequest{ProductID: "sku-1", Quantity: 1}
	b.Run("sold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Sell(ctx, order, client.SaleOptions{Strategy: "redis"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sold-out", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, err := c.Sell(ctx, order, client.SaleOptions{Strategy: "sold-out"})
			if p := (*client.Problem)(nil); !errors.As(err, &p) || p.Status != http.StatusConflict {
				b.Fatal(err)
			}
		}
	})
	b.Run("healthz", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Healthz(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
