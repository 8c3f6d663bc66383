package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"inventory/internal/testenv"
)

// TestZooKeeperStrategyThroughRun: with INVENTORY_ZOOKEEPER_SERVERS set the
// zookeeper strategy sells; without it a sale with it is 503.
func TestZooKeeperStrategyThroughRun(t *testing.T) {
	post := func(base, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	put := func(base string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", base+"/products/sku-zk", strings.NewReader(`{"quantity":2}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("PUT /products/sku-zk = %v, %v; want 201", resp, err)
		}
		resp.Body.Close()
	}

	base, stop := startService(t, map[string]string{"INVENTORY_ZOOKEEPER_SERVERS": strings.Join(testenv.ZooKeeperServers(t), ",")})
	put(base)
	if code, body := post(base, "/sale?strategy=zookeeper", `{"product_id":"sku-zk","quantity":1}`); code != 200 || !strings.Contains(body, `"strategy":"zookeeper"`) {
		t.Errorf("POST /sale?strategy=zookeeper = %d %s, want 200 and a zookeeper sale", code, body)
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}

	base, _ = startService(t, nil)
	if code, body := post(base, "/sale?strategy=zookeeper", `{"product_id":"sku-zk","quantity":1}`); code != 503 || !strings.Contains(body, "INVENTORY_ZOOKEEPER_SERVERS") {
		t.Errorf("POST /sale?strategy=zookeeper without ZooKeeper = %d %s, want 503 naming INVENTORY_ZOOKEEPER_SERVERS", code, body)
	}
}
