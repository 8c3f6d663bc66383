package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSalesByProductPathStickToOneReplica: through nginx, POST
// /products/{id}/sale always reaches the same replica for one product
// (consistent hashing), while different products spread over both; POST
// /sale keeps round robin.
func TestSalesByProductPathStickToOneReplica(t *testing.T) {
	f, err := Start(context.Background(), Options{Binary: binary, NoFsync: true, AdminToken: "tok"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })

	const products = 20
	owners := map[string]int{}
	for i := range products {
		id := fmt.Sprintf("sku-route-%d", i)
		if a := edgeDo(t, "PUT", f.URL+"/products/"+id, f.AdminToken, strings.NewReader(`{"quantity":10}`)); a.status != 201 {
			t.Fatalf("PUT /products/%s = %d %s, want 201", id, a.status, a.raw)
		}
		seen := map[string]int{}
		for range 3 {
			a := edgeDo(t, "POST", f.URL+"/products/"+id+"/sale", "", strings.NewReader(`{"quantity":1}`))
			if a.status != 200 {
				t.Fatalf("POST /products/%s/sale = %d %s, want 200", id, a.status, a.raw)
			}
			seen[a.header.Get("X-Instance")]++
		}
		if len(seen) != 1 {
			t.Errorf("3 sales of %s by path reached %v, want one replica", id, seen)
		}
		for inst := range seen {
			owners[inst]++
		}
	}
	if len(owners) != 2 {
		t.Errorf("%d products by path were owned by %v, want both replicas to own some", products, owners)
	}

	seen := map[string]int{}
	for range 4 {
		a := edgeDo(t, "POST", f.URL+"/sale", "", strings.NewReader(`{"product_id":"sku-route-0","quantity":1}`))
		if a.status != 200 {
			t.Fatalf("POST /sale = %d %s, want 200", a.status, a.raw)
		}
		seen[a.header.Get("X-Instance")]++
	}
	if len(seen) != 2 {
		t.Errorf("4 sales by POST /sale reached %v, want round robin over both replicas", seen)
	}
}
