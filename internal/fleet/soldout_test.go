package fleet

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"inventory/internal/client"

	"inventory/internal/testenv"
)

// TestSoldOutIsForgottenOnEveryReplicaWhenRestocked: both replicas see a
// product sold out and answer 409 from memory; a restock through one replica
// reaches the other by Redis pub/sub, so it sells again. The marks here last
// a minute (INVENTORY_SOLD_OUT_TTL), so only the announcement can end them.
func TestSoldOutIsForgottenOnEveryReplicaWhenRestocked(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f, err := Start(context.Background(), Options{Binary: binary, NoFsync: true, AdminToken: "tok",
		Env: map[string]string{"INVENTORY_SOLD_OUT_TTL": "1m", "INVENTORY_STRATEGY": "atomic"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	one, two := f.Replicas[0], f.Replicas[1]
	ctx := context.Background()
	restock := func(r *Replica, q int64) {
		t.Helper()
		if _, err := r.Client().Restock(ctx, "sku-soldout", client.RestockRequest{Quantity: q}); err != nil {
			t.Fatalf("PUT %s/products/sku-soldout: %v", r.URL, err)
		}
	}
	buy := func(r *Replica) error {
		t.Helper()
		_, err := client.New(r.URL, client.Options{HTTPClient: http.DefaultClient}).Sell(ctx, client.SaleRequest{ProductID: "sku-soldout", Quantity: 1}, client.SaleOptions{})
		return err
	}

	restock(one, 1)
	if err := buy(one); err != nil {
		t.Fatalf("the one unit on %s: %v", one.Instance, err)
	}
	for _, r := range f.Replicas {
		for i := range 2 { // the first 409 marks, the second comes from memory
			var p *client.Problem
			if err := buy(r); !errors.As(err, &p) || p.Status != 409 || p.Slug() != "sold-out" || p.Instance != r.Instance || p.RequestID == "" {
				t.Errorf("sale %d on %s after the sell-out = %v, want its own 409 sold-out problem with a request id", i+1, r.Instance, err)
			}
		}
	}

	restock(one, 2)
	// The replica that restocked forgot at once.
	if err := buy(one); err != nil {
		t.Errorf("sale on %s, which served the restock: %v", one.Instance, err)
	}
	// The other hears of it over pub/sub: its 409s stop within moments.
	var last error
	testenv.WaitFor(t, two.Instance+" to sell after the restock announcement", 15*time.Second, func() bool {
		last = buy(two)
		return last == nil
	})
	if last != nil {
		t.Errorf("sale on %s after the restock: %v", two.Instance, last)
	}
}
