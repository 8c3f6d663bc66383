package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"inventory/internal/client"
	"inventory/internal/testenv"
)

// TestZooKeeperStrategyThroughRun: with INVENTORY_ZOOKEEPER_SERVERS set the
// zookeeper strategy sells; without it a sale with it is 503.
func TestZooKeeperStrategyThroughRun(t *testing.T) {
	ctx := context.Background()
	order := client.SaleRequest{ProductID: "sku-zk", Quantity: 1}
	base, stop := startService(t, map[string]string{"INVENTORY_ZOOKEEPER_SERVERS": strings.Join(testenv.ZooKeeperServers(t), ",")})
	admin, _ := clients(base)
	if p, err := admin.Restock(ctx, "sku-zk", client.RestockRequest{Quantity: 2}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-zk = %+v, %v; want it created", p, err)
	}
	if sale, err := admin.Sell(ctx, order, client.SaleOptions{Strategy: "zookeeper"}); err != nil || sale.Strategy != "zookeeper" {
		t.Errorf("POST /sale?strategy=zookeeper = %+v, %v; want a zookeeper sale", sale, err)
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}

	base, _ = startService(t, nil)
	admin, _ = clients(base)
	_, err := admin.Sell(ctx, order, client.SaleOptions{Strategy: "zookeeper"})
	if p := (*client.Problem)(nil); !errors.As(err, &p) || p.Status != 503 || !strings.Contains(p.Detail, "INVENTORY_ZOOKEEPER_SERVERS") {
		t.Errorf("POST /sale?strategy=zookeeper without ZooKeeper = %v, want 503 naming INVENTORY_ZOOKEEPER_SERVERS", err)
	}
}
