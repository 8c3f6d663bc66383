package api

import (
	"net/http"
	"testing"
)

// TestReadBudgetRefusesReadsNotSales: with the read budget spent, every
// anonymous read (a product, a round, /live, an order) gets 429
// too-many-requests with Retry-After and reads nothing, while a sale still
// sells, an order's step is still taken, and an admin still restocks and
// reads.
func TestReadBudgetRefusesReadsNotSales(t *testing.T) {
	f := newFixture(t, adminToken, func(c *Config) { c.ReadRate = 0.001 }) // a burst of 1, then one read in 1000 s
	f.restock("sku-budget", 5)
	held := f.do(http.MethodPost, "/sale", jsonType, `{"product_id":"sku-budget","quantity":1,"pay_within":"1m"}`)
	order, _ := held.body["order_id"].(string)
	if held.status != http.StatusCreated || order == "" {
		t.Fatalf("a hold = %d %s, want 201 with an order", held.status, held.raw)
	}
	if r := f.do(http.MethodGet, "/products/sku-budget", "", ""); r.status != http.StatusOK {
		t.Fatalf("the first read = %d %s, want 200 (the budget's burst)", r.status, r.raw)
	}
	for _, path := range []string{"/products/sku-budget", "/products/sku-budget/rounds/1", "/live?since=0", "/orders/" + order} {
		r := f.do(http.MethodGet, path, "", "")
		if r.status != http.StatusTooManyRequests || r.body["type"] != "urn:inventory:problem:too-many-requests" || r.header.Get("Retry-After") != "1" {
			t.Errorf("GET %s with the budget spent = %d (Retry-After %q) %s, want 429 too-many-requests with Retry-After 1",
				path, r.status, r.header.Get("Retry-After"), r.raw)
		}
	}
	if r := f.do(http.MethodGet, "/products/sku-budget", "", "", admin...); r.status != http.StatusOK {
		t.Errorf("a read with the admin token, the budget spent = %d %s, want 200 (admins do not wait on it)", r.status, r.raw)
	}
	if r := f.do(http.MethodGet, "/products/sku-budget", "", "", "Authorization", "Bearer wrong"); r.status != http.StatusTooManyRequests {
		t.Errorf("a read with a wrong token, the budget spent = %d %s, want 429 like any anonymous read", r.status, r.raw)
	}
	if r := f.do(http.MethodPost, "/sale", jsonType, `{"product_id":"sku-budget","quantity":1}`); r.status != http.StatusOK {
		t.Errorf("a sale with the read budget spent = %d %s, want 200", r.status, r.raw)
	}
	if r := f.do(http.MethodPost, "/orders/"+order+"/cancel", "", ""); r.status != http.StatusOK {
		t.Errorf("a cancel with the read budget spent = %d %s, want 200 (a step is no read)", r.status, r.raw)
	}
	if r := f.do(http.MethodGet, "/orders/"+order, "", "", admin...); r.status != http.StatusOK || r.body["state"] != "cancelled" {
		t.Errorf("an order read with the admin token, the budget spent = %d %s, want 200 cancelled", r.status, r.raw)
	}
	if r := f.do(http.MethodPut, "/products/sku-budget", jsonType, `{"quantity":7}`, admin...); r.status != http.StatusOK {
		t.Errorf("a restock with the read budget spent = %d %s, want 200", r.status, r.raw)
	}
	if p := f.product("sku-budget"); p.Quantity != 7 {
		t.Errorf("stock after the restock = %d, want 7", p.Quantity)
	}
}
