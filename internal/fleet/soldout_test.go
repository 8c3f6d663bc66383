package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSoldOutIsForgottenOnEveryReplicaWhenRestocked: both replicas see a
// product sold out and answer 409 from memory; a restock through one replica
// reaches the other by Redis pub/sub, so it sells again. The marks here last
// a minute (INVENTORY_SOLD_OUT_TTL), so only the announcement can end them.
func TestSoldOutIsForgottenOnEveryReplicaWhenRestocked(t *testing.T) {
	f, err := Start(context.Background(), Options{Binary: binary, NoFsync: true, AdminToken: "tok",
		Env: map[string]string{"INVENTORY_SOLD_OUT_TTL": "1m", "INVENTORY_STRATEGY": "atomic"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	one, two := f.Replicas[0], f.Replicas[1]
	restock := func(base string, q string) {
		t.Helper()
		a := edgeDo(t, "PUT", base+"/products/sku-soldout", f.AdminToken, strings.NewReader(`{"quantity":`+q+`}`))
		if a.status != 200 && a.status != 201 {
			t.Fatalf("PUT %s/products/sku-soldout = %d %s, want 200 or 201", base, a.status, a.raw)
		}
	}
	buy := func(base string) edgeAnswer {
		t.Helper()
		return edgeDo(t, "POST", base+"/sale", "", strings.NewReader(`{"product_id":"sku-soldout","quantity":1}`))
	}

	restock(f.URL, "1")
	if a := buy(one.URL); a.status != 200 {
		t.Fatalf("the one unit on %s = %d %s, want 200", one.Instance, a.status, a.raw)
	}
	for _, r := range f.Replicas {
		for i := range 2 { // the first 409 marks, the second comes from memory
			checkProblem(t, fmt.Sprintf("sale %d on %s after the sell-out", i+1, r.Instance), buy(r.URL), 409, "sold-out")
		}
	}

	restock(one.URL, "2")
	// The replica that restocked forgot at once.
	if a := buy(one.URL); a.status != 200 {
		t.Errorf("sale on %s, which served the restock = %d %s, want 200", one.Instance, a.status, a.raw)
	}
	// The other hears of it over pub/sub: its 409s stop within moments.
	var last edgeAnswer
	waitUntil(t, two.Instance+" to sell after the restock announcement", func() bool {
		last = buy(two.URL)
		return last.status == 200
	})
	if last.status != 200 {
		t.Errorf("sale on %s after the restock = %d %s", two.Instance, last.status, last.raw)
	}
}
