package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"inventory/internal/api"
	"inventory/internal/api/spectest"
	"inventory/internal/client"
	"inventory/internal/fleet"

	"inventory/internal/testenv"
)

// TestEveryCallAgainstTheService makes every call once against a real
// replica behind nginx, every exchange checked against the OpenAPI
// description on the way.
func TestEveryCallAgainstTheService(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	checker, err := spectest.New(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.Start(ctx, fleet.Options{Replicas: 1, NoLockServices: true, NoFsync: true, AdminToken: "tok"})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	checked := &http.Client{Transport: checker.Transport(t, nil), Timeout: 30 * time.Second}
	admin := client.New(f.URL, client.Options{AdminToken: f.AdminToken, HTTPClient: checked})
	buyer := client.New(f.URL, client.Options{HTTPClient: checked})
	const id = "sku-client"
	problem := func(what string, err error, status int, slug string) *client.Problem {
		t.Helper()
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != status || p.Slug() != slug || p.RequestID == "" || p.Instance != "inventory-1" {
			t.Errorf("%s = %v, want a %d %s *Problem from inventory-1 with its request id", what, err, status, slug)
			return &client.Problem{}
		}
		return p
	}

	if p, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 3, Name: "client test"}); err != nil || p.Round != 1 || p.Quantity != 3 || p.Name != "client test" {
		t.Fatalf("Restock(%s, 3) = %+v, %v; want round 1 of 3 units named client test", id, p, err)
	}
	if p, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 3}); err != nil || p.Round != 2 || p.Name != "client test" {
		t.Fatalf("Restock(%s, 3) again = %+v, %v; want round 2, the name kept", id, p, err)
	}
	_, err = buyer.Restock(ctx, id, client.RestockRequest{Quantity: 1})
	problem("Restock without the admin token", err, 401, "unauthorized")
	// Safe to retry: by key (the first answer again, no round), by round (412).
	const retriedID = "sku-client-retried"
	if p, err := admin.Restock(ctx, retriedID, client.RestockRequest{Quantity: 1}); err != nil || p.Round != 1 {
		t.Fatalf("Restock(%s, 1) = %+v, %v; want round 1", retriedID, p, err)
	}
	retried := client.RestockRequest{Quantity: 3, IdempotencyKey: "client-restock-1", IfRound: 1}
	for i := range 2 {
		if p, err := admin.Restock(ctx, retriedID, retried); err != nil || p.Round != 2 || p.Quantity != 3 {
			t.Fatalf("Restock(%s, 3) with a key and If-Match round 1, try %d = %+v, %v; want round 2 both times", retriedID, i+1, p, err)
		}
	}
	_, err = admin.Restock(ctx, retriedID, client.RestockRequest{Quantity: 3, IfRound: 1})
	problem("Restock with If-Match round 1 once the product is in round 2", err, 412, "round-moved")

	sale, err := buyer.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{})
	if err != nil || sale.SaleID == 0 || sale.ProductID != id || sale.Round != 2 || sale.Remaining != 2 || sale.Strategy != "redis" || sale.Instance != "inventory-1" {
		t.Errorf("Sell(%s, 1) = %+v, %v; want a sale of round 2 by redis (the default) on inventory-1, 2 left", id, sale, err)
	}
	keyed := client.SaleOptions{Strategy: "atomic", IdempotencyKey: "client-test-1"}
	first, err := admin.SellProduct(ctx, id, client.ProductSaleRequest{Quantity: 1}, keyed)
	if err != nil || first.Strategy != "atomic" || first.Replayed || first.Remaining != 1 {
		t.Errorf("SellProduct(%s, 1) with atomic and a key = %+v, %v; want a new atomic sale, 1 left", id, first, err)
	}
	again, err := admin.SellProduct(ctx, id, client.ProductSaleRequest{Quantity: 1}, keyed)
	if err != nil || !again.Replayed || again.SaleID != first.SaleID {
		t.Errorf("SellProduct(%s, 1) with the same key = %+v, %v; want sale %d replayed", id, again, err, first.SaleID)
	}
	_, err = buyer.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{Strategy: "atomic"})
	problem("Sell naming a strategy without the admin token", err, 401, "unauthorized")
	_, err = admin.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{Strategy: "nope"})
	problem("Sell with an unknown strategy", err, 400, "unknown-strategy")
	_, err = buyer.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 0}, client.SaleOptions{})
	problem("Sell of 0 units", err, 400, "bad-quantity")
	_, err = buyer.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 2}, client.SaleOptions{})
	if p := problem("Sell of 2 units with 1 left", err, 409, "sold-out"); p.Method != "POST" || p.Path != "/sale" || p.InstancePath != "/sale" || client.Retryable(p) {
		t.Errorf("the sold-out problem = %+v, want POST /sale, not retryable", p)
	}

	if p, err := buyer.Product(ctx, id); err != nil || p.Quantity != 1 || p.Sold != 2 || p.Sales != 2 || p.Round != 2 || p.Initial != 3 {
		t.Errorf("Product(%s) = %+v, %v; want 1 left of 3, 2 sold in 2 sales, round 2", id, p, err)
	}
	_, err = buyer.Product(ctx, "no-such-product")
	problem("Product of an unknown id", err, 404, "product-not-found")
	_, err = buyer.Product(ctx, "bad id")
	problem("Product of a bad id", err, 400, "bad-product-id")
	if r, err := buyer.Round(ctx, id, 1); err != nil || r.Initial != 3 || r.Sold != 0 || r.Current {
		t.Errorf("Round(%s, 1) = %+v, %v; want 3 initial, none sold, not current", id, r, err)
	}
	if r, err := buyer.Round(ctx, id, 2); err != nil || r.Sold != 2 || r.Sales != 2 || !r.Current {
		t.Errorf("Round(%s, 2) = %+v, %v; want 2 sold, current", id, r, err)
	}
	h, err := admin.Holds(ctx, id)
	if err != nil || h.Instance != "inventory-1" || len(h.Holds) == 0 || h.Holds[0].Strategy != "redis" || h.Holds[0].Outcome != "sold" || h.Holds[0].End.Before(h.Holds[0].Start) {
		t.Errorf("Holds(%s) = %+v, %v; want redis's sale first, ended", id, h, err)
	}

	list, err := buyer.Strategies(ctx)
	i := slices.IndexFunc(list, func(s client.StrategyInfo) bool { return s.Name == "etcd" })
	j := slices.IndexFunc(list, func(s client.StrategyInfo) bool { return s.Name == "atomic" })
	if err != nil || i < 0 || j < 0 || list[i].Available || list[i].Needs != "INVENTORY_ETCD_ENDPOINTS" || !list[j].Available || !list[j].Safe {
		t.Errorf("Strategies() = %+v, %v; want etcd unavailable (no lock services) and atomic safe and available", list, err)
	}
	if err := admin.SetStrategy(ctx, "atomic"); err != nil {
		t.Errorf("SetStrategy(atomic) = %v", err)
	}
	if s, err := buyer.Strategy(ctx); err != nil || s != "atomic" {
		t.Errorf("Strategy() after switching to atomic = %q, %v", s, err)
	}
	problem("SetStrategy without the admin token", buyer.SetStrategy(ctx, "none"), 401, "unauthorized")

	if h, err := buyer.Healthz(ctx); err != nil || h != (client.Health{Status: "ok", Instance: "inventory-1"}) {
		t.Errorf("Healthz() = %+v, %v", h, err)
	}
	if h, err := buyer.Readyz(ctx); err != nil || h != (client.Health{Status: "ready", Instance: "inventory-1"}) {
		t.Errorf("Readyz() = %+v, %v", h, err)
	}
	if l, err := buyer.Live(ctx, -1); err != nil || l.Default != "atomic" || len(l.Products) == 0 || l.LastSaleID < first.SaleID || len(l.SalesSince) != 0 {
		t.Errorf("Live(-1) = %+v, %v; want the default, the product, the last sale, no sales counted", l, err)
	}
	if l, err := buyer.Live(ctx, 0); err != nil || l.SalesSince["redis"] != 1 || l.SalesSince["atomic"] != 1 {
		t.Errorf("Live(0) = %+v, %v; want one sale each by redis and atomic", l, err)
	}
	if m, err := buyer.Metrics(ctx); err != nil || !bytes.Contains(m, []byte("inventory_")) {
		t.Errorf("Metrics() = %.200s, %v; want the service's metrics", m, err)
	}
	if y, err := buyer.OpenAPI(ctx); err != nil || !bytes.Equal(y, api.OpenAPI) {
		t.Errorf("OpenAPI() = %d bytes, %v; want the embedded description", len(y), err)
	}
	if p, err := admin.Profile(ctx, "cmdline", 0); err != nil || !strings.Contains(string(p), "inventory") {
		t.Errorf("Profile(cmdline) = %q, %v; want the replica's command line", p, err)
	}
	_, err = buyer.Profile(ctx, "cmdline", 0)
	problem("Profile without the admin token", err, 401, "unauthorized")

	// An order's life: a hold, its replay, its steps and their refusals.
	const orderProduct = "sku-client-orders"
	if _, err := admin.Restock(ctx, orderProduct, client.RestockRequest{Quantity: 3}); err != nil {
		t.Fatal(err)
	}
	holdOpts := client.SaleOptions{IdempotencyKey: "client-hold-1"}
	held, err := buyer.Hold(ctx, client.SaleRequest{ProductID: orderProduct, Quantity: 2, PayWithin: "15m"}, holdOpts)
	if err != nil || held.OrderID == "" || held.State != "held" || held.Remaining != 1 || held.Replayed || held.Instance != "inventory-1" ||
		time.Until(held.ExpiresAt) < 14*time.Minute || time.Until(held.ExpiresAt) > 16*time.Minute {
		t.Fatalf("Hold(%s, 2, 15m) = %+v, %v; want an order held for 15 minutes, 1 left", orderProduct, held, err)
	}
	if again, err := buyer.Hold(ctx, client.SaleRequest{ProductID: orderProduct, Quantity: 2, PayWithin: "15m"}, holdOpts); err != nil ||
		!again.Replayed || again.OrderID != held.OrderID {
		t.Errorf("Hold with the same key = %+v, %v; want order %s replayed", again, err, held.OrderID)
	}
	if o, err := buyer.Order(ctx, held.OrderID); err != nil || o.State != "held" || len(o.History) != 1 || o.Quantity != 2 || o.ProductID != orderProduct {
		t.Errorf("Order(%s) = %+v, %v; want it held, 2 of %s", held.OrderID, o, err, orderProduct)
	}
	_, err = buyer.Refund(ctx, held.OrderID)
	if p := problem("Refund of a held order", err, 409, "order-state"); p.State != "held" {
		t.Errorf("Refund of a held order: problem state %q, want held", p.State)
	}
	for _, step := range []func(context.Context, string) (client.Order, error){buyer.Pay, buyer.Pay, buyer.Ship} {
		if _, err := step(ctx, held.OrderID); err != nil {
			t.Errorf("a step of order %s = %v", held.OrderID, err)
		}
	}
	if o, err := buyer.Order(ctx, held.OrderID); err != nil || o.State != "shipped" || len(o.History) != 3 || o.History[2].By != "inventory-1" {
		t.Errorf("Order(%s) after pay, pay, ship = %+v, %v; want it shipped, history held, paid, shipped by inventory-1", held.OrderID, o, err)
	}
	byPath, err := buyer.HoldProduct(ctx, orderProduct, client.ProductSaleRequest{Quantity: 1, PayWithin: "90s"}, client.SaleOptions{})
	if err != nil || byPath.Remaining != 0 {
		t.Errorf("HoldProduct(%s, 1, 90s) = %+v, %v; want the last unit held", orderProduct, byPath, err)
	}
	if o, err := buyer.Cancel(ctx, byPath.OrderID); err != nil || o.State != "cancelled" {
		t.Errorf("Cancel(%s) = %+v, %v; want it cancelled", byPath.OrderID, o, err)
	}
	if p, err := buyer.Product(ctx, orderProduct); err != nil || p.Quantity != 1 {
		t.Errorf("Product(%s) after the cancel = %+v, %v; want its unit back", orderProduct, p, err)
	}
	_, err = buyer.Hold(ctx, client.SaleRequest{ProductID: orderProduct, Quantity: 1, PayWithin: "25h"}, client.SaleOptions{})
	problem("Hold for 25 hours", err, 400, "bad-pay-within")
	_, err = buyer.Order(ctx, "3f2b5c1e-8d4a-4b6e-9c1f-2a7d5e8b9c0d")
	problem("Order of an unknown id", err, 404, "order-not-found")
	_, err = buyer.Pay(ctx, "42")
	problem("Pay of a bad id", err, 400, "bad-order-id")

	// With the fleet gone, a call gets no answer at all: an error, not a
	// *Problem, that a buyer may retry.
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = buyer.Healthz(ctx)
	if p := (*client.Problem)(nil); err == nil || errors.As(err, &p) || !client.Retryable(err) {
		t.Errorf("Healthz() with the fleet stopped = %v, want a transport error", err)
	}
}
