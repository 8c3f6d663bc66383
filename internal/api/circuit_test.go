package api

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/testenv"
	"inventory/internal/watchdog"
)

// TestCircuit: once the watchdog finds a product oversold, both sale routes
// refuse it with 503 circuit-open saying what was found, other products
// still sell, and an admin's POST /products/{id}/circuit reopens its sales.
func TestCircuit(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("hot", 3)
	f.restock("calm", 3)
	ctx := context.Background()
	// What an unsafe strategy leaves behind: one unit sold too many.
	if _, err := f.pool.Exec(ctx, `UPDATE stock SET quantity = -1 WHERE product_id = 'hot'`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO sales (product_id, round, quantity, strategy, instance) SELECT 'hot', 1, 1, 'none', 'x' FROM generate_series(1, 4)`); err != nil {
		t.Fatal(err)
	}
	wd := watchdog.New(f.pool, f.circuits, watchdog.Options{Instance: "test-1"})
	if found, err := wd.Check(ctx); err != nil || len(found) != 1 {
		t.Fatalf("watchdog Check = %v, %v; want the oversold product", found, err)
	}

	for _, sale := range []struct{ path, body string }{
		{"/sale", `{"product_id":"hot","quantity":1}`},
		{"/products/hot/sale", `{"quantity":1}`},
	} {
		r := f.do("POST", sale.path, jsonType, sale.body)
		detail, _ := r.body["detail"].(string)
		if r.status != 503 || r.body["type"] != "urn:inventory:problem:circuit-open" || r.header.Get("Retry-After") == "" ||
			!strings.Contains(detail, "stock -1") || !strings.Contains(detail, "4 units in the ledger") {
			t.Errorf("POST %s of the oversold product = %d %v (Retry-After %q), want 503 circuit-open with the evidence", sale.path, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"calm","quantity":1}`); r.status != 200 {
		t.Errorf("POST /sale of another product = %d %v, want 200", r.status, r.body)
	}

	if r := f.do("POST", "/products/hot/circuit", "", ""); r.status != 401 {
		t.Errorf("POST /products/hot/circuit without the token = %d, want 401", r.status)
	}
	if r := f.do("POST", "/products/bad%20id/circuit", "", "", admin...); r.status != 400 {
		t.Errorf("POST /products/bad%%20id/circuit = %d, want 400", r.status)
	}
	r := f.do("POST", "/products/hot/circuit", "", "", admin...)
	closed, _ := r.body["closed"].(map[string]any)
	if r.status != 200 || r.body["open"] != false || closed["kind"] != "negative_stock" || closed["quantity"] != float64(-1) || closed["sold"] != float64(4) {
		t.Fatalf("POST /products/hot/circuit = %d %v, want 200 with the evidence it closed on", r.status, r.body)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"hot","quantity":1}`); r.status != 409 {
		t.Errorf("POST /sale of the product after its circuit closed = %d %v, want 409 sold-out (its stock is -1)", r.status, r.body)
	}
	if r := f.do("POST", "/products/hot/circuit", "", "", admin...); r.status != 200 || r.body["closed"] != nil {
		t.Errorf("POST /products/hot/circuit again = %d %v, want 200 with nothing closed", r.status, r.body)
	}
	if found, err := wd.Check(ctx); err != nil || len(found) != 1 {
		t.Fatalf("watchdog Check after the close = %v, %v; want the same violation still found", found, err)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"hot","quantity":1}`); r.status != 409 {
		t.Errorf("POST /sale after the watchdog saw the same evidence again = %d %v, want 409 (closed stays closed)", r.status, r.body)
	}
}

// TestCircuitCloseWithPostgresDown is 503 unavailable, not a 500.
func TestCircuitCloseWithPostgresDown(t *testing.T) {
	dead, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	f := newFixture(t, adminToken, func(c *Config) { c.Circuits = watchdog.NewCircuits(dead) })
	if r := f.do("POST", "/products/hot/circuit", "", "", admin...); r.status != 503 || r.body["type"] != "urn:inventory:problem:unavailable" {
		t.Errorf("POST /products/hot/circuit with Postgres gone = %d %v, want 503 unavailable", r.status, r.body)
	}
}

// TestCircuitCloseIsRefusedWithoutAConfiguredToken: 403, like every admin call.
func TestCircuitCloseIsRefusedWithoutAConfiguredToken(t *testing.T) {
	f := newFixture(t, "")
	if r := f.do("POST", "/products/hot/circuit", "", "", "Authorization", "Bearer "); r.status != 403 || r.body["type"] != problemTypePrefix+"admin-disabled" {
		t.Errorf("POST /products/hot/circuit with no admin token configured = %d %s, want 403 admin-disabled", r.status, r.raw)
	}
}
