package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"inventory/internal/client"
	"inventory/internal/inventory"
	"inventory/internal/testenv"
)

// TestRedisClusterThroughRun: with INVENTORY_REDIS_CLUSTER the service
// reaches Redis through a cluster client (the URL points nowhere): every
// Redis strategy sells, GET /strategies says what the cluster does not
// change about redlock, and once the master of the product's slot is
// killed, sales come back when its replica has taken over.
func TestRedisClusterThroughRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := testenv.PrivateRedisCluster(t)
	base, _ := startService(t, map[string]string{
		"INVENTORY_REDIS_URL":     "redis://127.0.0.1:1/0", // nothing listens there
		"INVENTORY_REDIS_CLUSTER": strings.Join(cluster.Seeds()[:2], ","),
		"INVENTORY_STRATEGY":      "lua",
	})
	admin, _ := clients(base)
	const id = "sku-cluster"
	if p, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 100}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/%s = %+v, %v; want it created", id, p, err)
	}
	sell := func(strategy string) (client.Sale, error) {
		return admin.Sell(ctx, client.SaleRequest{ProductID: id, Quantity: 1}, client.SaleOptions{Strategy: strategy})
	}
	for _, name := range []string{"setnx", "redis", "reentrant", "fair", "lua", "handoff"} {
		if sale, err := sell(name); err != nil || sale.Strategy != name {
			t.Errorf("POST /sale?strategy=%s on the cluster = %+v, %v; want sold by %s", name, sale, err, name)
		}
	}
	list, err := admin.Strategies(ctx)
	if err != nil {
		t.Fatalf("GET /strategies: %v", err)
	}
	for _, s := range list {
		if s.Name == inventory.Redlock && !strings.Contains(s.Description, "not Redlock") {
			t.Errorf("GET /strategies: redlock is described %q, want it to say Redlock over one cluster is not Redlock", s.Description)
		}
	}

	master, err := cluster.MasterOf(ctx, "stock:{"+id+"}")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(master.Pid(), syscall.SIGKILL); err != nil {
		t.Fatalf("kill the master of %s's slot: %v", id, err)
	}
	began := time.Now()
	testenv.WaitFor(t, "a lua sale after the master of the product's slot died", time.Minute, func() bool {
		_, err := sell("lua")
		if s := client.StatusOf(err); err != nil && s != 503 {
			t.Fatalf("sale during the failover = %v, want 200 or 503", err)
		}
		return err == nil
	})
	t.Logf("sales came back %v after the master was killed", time.Since(began).Round(time.Millisecond))
	for _, name := range []string{"redis", "reentrant", "fair", "handoff"} {
		if sale, err := sell(name); err != nil || sale.Strategy != name {
			t.Errorf("POST /sale?strategy=%s after the failover = %+v, %v; want sold by %s", name, sale, err, name)
		}
	}
	if p, err := admin.Product(ctx, id); err != nil || p.Initial-p.Quantity != p.Sold {
		t.Errorf("product after the failover = %+v, %v; want initial - quantity = sold", p, err)
	}
}

// TestRedisClusterConfiguration: INVENTORY_REDIS_CLUSTER takes host:port
// seeds, excludes Sentinel, and has only database 0.
func TestRedisClusterConfiguration(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"INVENTORY_REDIS_CLUSTER": "127.0.0.1:7000,nohost"}, "INVENTORY_REDIS_CLUSTER: want comma-separated host:port"},
		{map[string]string{"INVENTORY_REDIS_CLUSTER": "127.0.0.1:7000", "INVENTORY_REDIS_SENTINELS": "127.0.0.1:26379", "INVENTORY_REDIS_MASTER": "m"},
			"INVENTORY_REDIS_CLUSTER: set it or INVENTORY_REDIS_SENTINELS, not both"},
		{map[string]string{"INVENTORY_REDIS_CLUSTER": "127.0.0.1:7000", "INVENTORY_REDIS_URL": "redis://127.0.0.1:7000/3"}, "INVENTORY_REDIS_CLUSTER: a Redis Cluster has only database 0"},
	} {
		tc.env["INVENTORY_INSTANCE"] = "x"
		var stderr bytes.Buffer
		err := run(context.Background(), nil, envFrom(tc.env), io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("run with %v = %v, want one line containing %q", tc.env, err, tc.want)
		}
	}
}
