package fleet

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"inventory/internal/client"

	"inventory/internal/testenv"
)

// TestSalesByProductPathStickToOneReplica: through nginx, POST
// /products/{id}/sale always reaches the same replica for one product
// (consistent hashing), while different products spread over both; POST
// /sale keeps round robin.
func TestSalesByProductPathStickToOneReplica(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f, err := Start(context.Background(), Options{Binary: binary, NoFsync: true, AdminToken: "tok"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })

	ctx := context.Background()
	admin, buyer := f.Client(), client.New(f.URL, client.Options{HTTPClient: http.DefaultClient})
	const products = 20
	owners := map[string]int{}
	for i := range products {
		id := fmt.Sprintf("sku-route-%d", i)
		if p, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 10}); err != nil || p.Round != 1 {
			t.Fatalf("PUT /products/%s = %+v, %v; want it created", id, p, err)
		}
		seen := map[string]int{}
		for range 3 {
			sale, err := buyer.SellProduct(ctx, id, client.ProductSaleRequest{Quantity: 1}, client.SaleOptions{})
			if err != nil {
				t.Fatalf("POST /products/%s/sale: %v", id, err)
			}
			seen[sale.Instance]++
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
		sale, err := buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-route-0", Quantity: 1}, client.SaleOptions{})
		if err != nil {
			t.Fatalf("POST /sale: %v", err)
		}
		seen[sale.Instance]++
	}
	if len(seen) != 2 {
		t.Errorf("4 sales by POST /sale reached %v, want round robin over both replicas", seen)
	}
}
