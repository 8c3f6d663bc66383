package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/internal/localstack"
	"inventory/internal/settings"
	"inventory/internal/testenv"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func envFrom(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestBadConfigurationFailsWithOneClearLine(t *testing.T) {
	for _, tc := range []struct {
		key, value, want string
	}{
		{"INVENTORY_LOCK_TTL", "abc", "INVENTORY_LOCK_TTL"},
		{"INVENTORY_LOCK_TTL", "1ms", "INVENTORY_LOCK_TTL: must be at least 10ms"},
		{"INVENTORY_LOCK_WAIT", "-1s", "INVENTORY_LOCK_WAIT"},
		{"INVENTORY_WORK_DELAY", "-5ms", "INVENTORY_WORK_DELAY"},
		{"INVENTORY_SOLD_OUT_TTL", "-1s", "INVENTORY_SOLD_OUT_TTL: must be 0 (off) or more"},
		{"INVENTORY_MAX_WAITING", "-1", "INVENTORY_MAX_WAITING: must be 0 (no limit) or more"},
		{"INVENTORY_MAX_WAITING", "many", "INVENTORY_MAX_WAITING"},
		{"INVENTORY_WORK_DELAY", "31s", "INVENTORY_WORK_DELAY"},
		{"INVENTORY_STRATEGY", "magic", `INVENTORY_STRATEGY: unknown strategy "magic" (want one of none, local, setnx, redis`},
		{"INVENTORY_ADDR", "8080", "INVENTORY_ADDR"},
		{"INVENTORY_MIGRATE", "maybe", "INVENTORY_MIGRATE"},
		{"INVENTORY_MAX_QUANTITY", "0", "INVENTORY_MAX_QUANTITY"},
		{"INVENTORY_MAX_QUANTITY", "ten", "INVENTORY_MAX_QUANTITY"},
		{"INVENTORY_POSTGRES_URL", "postgres://u:hunter2@[::1", "INVENTORY_POSTGRES_URL"},
		{"INVENTORY_REDIS_URL", "http://127.0.0.1:6379", "INVENTORY_REDIS_URL"},
		{"INVENTORY_LOG_LEVEL", "loud", "INVENTORY_LOG_LEVEL"},
		{"INVENTORY_REDIS_SENTINELS", "127.0.0.1:26379", "INVENTORY_REDIS_SENTINELS: set it together with INVENTORY_REDIS_MASTER"},
		{"INVENTORY_REDIS_MASTER", "inventory", "INVENTORY_REDIS_SENTINELS: set it together with INVENTORY_REDIS_MASTER"},
		{"INVENTORY_STRATEGY", "etcd", `INVENTORY_STRATEGY: strategy "etcd" needs INVENTORY_ETCD_ENDPOINTS, which is not set`},
		{"INVENTORY_ETCD_ENDPOINTS", "http://127.0.0.1:2379", "INVENTORY_ETCD_ENDPOINTS: want comma-separated host:port"},
		{"INVENTORY_REDLOCK_URLS", "redis://127.0.0.1:7001,redis://127.0.0.1:7002", "INVENTORY_REDLOCK_URLS: want 3 or more"},
		{"INVENTORY_REDLOCK_URLS", "redis://127.0.0.1:7001,redis://127.0.0.1:7002,http://127.0.0.1:7003", "INVENTORY_REDLOCK_URLS: entry 3"},
		{"INVENTORY_ZOOKEEPER_SERVERS", "127.0.0.1:2181,nohost", "INVENTORY_ZOOKEEPER_SERVERS: want comma-separated host:port"},
	} {
		env := map[string]string{"INVENTORY_INSTANCE": "x", tc.key: tc.value}
		var stderr bytes.Buffer
		err := run(context.Background(), nil, envFrom(env), io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("run with %s=%q = %v, want one line containing %q", tc.key, tc.value, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("run with %s=%q leaks the password: %v", tc.key, tc.value, err)
		}
	}
}

func TestCommandLine(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, envFrom(nil), &out, io.Discard); err != nil || !strings.Contains(out.String(), "usage: inventory") {
		t.Errorf("run(help) = %v, output %q; want the usage", err, out.String())
	}
	if err := run(context.Background(), []string{"frobnicate"}, envFrom(nil), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Errorf("run(frobnicate) = %v, want unknown command", err)
	}
	if err := run(context.Background(), []string{"serve", "extra"}, envFrom(nil), io.Discard, io.Discard); err == nil {
		t.Errorf("run(serve extra) = nil, want an error")
	}
}

// startService runs the real service through run on a free port and returns
// its base URL and a stop function that returns run's error.
func startService(t *testing.T, extra map[string]string) (string, func() error) {
	t.Helper()
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"INVENTORY_ADDR":         "127.0.0.1:" + itoa(port),
		"INVENTORY_INSTANCE":     "e2e-1",
		"INVENTORY_POSTGRES_URL": testenv.PostgresURL(t),
		"INVENTORY_REDIS_URL":    testenv.RedisURL(t),
		"INVENTORY_ADMIN_TOKEN":  "tok",
		"INVENTORY_STRATEGY":     "reentrant",
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs localstack.LogBuffer
	go func() { done <- run(ctx, nil, envFrom(env), io.Discard, &logs) }()
	base := "http://127.0.0.1:" + itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run exited before ready: %v\nlogs:\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("service not ready in 30s\nlogs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("run did not return 30s after cancel\nlogs:\n%s", logs.String())
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return base, stop
}

func TestEndToEndThroughRun(t *testing.T) {
	base, stop := startService(t, nil)
	call := func(method, path, body string, wantStatus int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &out)
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, wantStatus)
		}
		if resp.Header.Get("X-Instance") != "e2e-1" {
			t.Errorf("%s %s: X-Instance = %q, want e2e-1", method, path, resp.Header.Get("X-Instance"))
		}
		return out
	}
	call("PUT", "/products/sku-e2e", `{"quantity":2,"name":"e2e"}`, 201)
	sale := call("POST", "/sale", `{"product_id":"sku-e2e","quantity":1}`, 200)
	if sale["strategy"] != "reentrant" || sale["remaining"] != float64(1) || sale["round"] != float64(1) {
		t.Errorf("sale = %v, want strategy reentrant (the configured default), remaining 1, round 1", sale)
	}
	call("POST", "/sale?strategy=atomic", `{"product_id":"sku-e2e","quantity":2}`, 409) // call sends the admin token
	if resp, err := http.Post(base+"/sale?strategy=atomic", "application/json", strings.NewReader(`{"product_id":"sku-e2e","quantity":1}`)); err != nil || resp.StatusCode != 401 {
		t.Errorf("anonymous POST /sale?strategy=atomic = %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if r := call("GET", "/products/sku-e2e/rounds/1", "", 200); r["initial"] != float64(2) || r["sold"] != float64(1) || r["current"] != true {
		t.Errorf("round 1 = %v, want initial 2, sold 1, current", r)
	}
	p := call("GET", "/products/sku-e2e", "", 200)
	if p["quantity"] != float64(1) || p["sold"] != float64(1) || p["sales"] != float64(1) {
		t.Errorf("product = %v, want quantity 1, sold 1, sales 1", p)
	}
	// The replica records its lock holds: the reentrant sale's, not atomic's.
	holds, _ := call("GET", "/products/sku-e2e/holds", "", 200)["holds"].([]any)
	if hold, _ := first(holds).(map[string]any); len(holds) != 1 || hold["strategy"] != "reentrant" || hold["outcome"] != "sold" {
		t.Errorf("holds = %v, want the one reentrant hold, sold", holds)
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}

// TestEtcdStrategyThroughRun: with INVENTORY_ETCD_ENDPOINTS set, the etcd
// strategy is built and sells, and the service closes its Locker at shutdown.
func TestEtcdStrategyThroughRun(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	base, stop := startService(t, map[string]string{
		"INVENTORY_ETCD_ENDPOINTS": strings.Join(eps, ","),
		"INVENTORY_STRATEGY":       "etcd",
	})
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	if code, body := do("PUT", "/products/sku-etcd", `{"quantity":2,"name":"etcd"}`); code != 201 {
		t.Fatalf("PUT /products/sku-etcd = %d %s, want 201", code, body)
	}
	if code, body := do("POST", "/sale", `{"product_id":"sku-etcd","quantity":1}`); code != 200 || !strings.Contains(body, `"strategy":"etcd"`) {
		t.Errorf("POST /sale with the etcd default = %d %s, want 200 by etcd", code, body)
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}

func TestShutdownDrainsInFlightSales(t *testing.T) {
	pg := testenv.PostgresURL(t)
	base, stop := startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg, "INVENTORY_WORK_DELAY": "700ms", "INVENTORY_STRATEGY": "forupdate"})
	put, _ := http.NewRequest("PUT", base+"/products/sku-drain", strings.NewReader(`{"quantity":10}`))
	put.Header.Set("Content-Type", "application/json")
	put.Header.Set("Authorization", "Bearer tok")
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT product: %v %v", resp, err)
	}
	var wg sync.WaitGroup
	status := make(chan int, 1)
	wg.Go(func() {
		resp, err := http.Post(base+"/sale", "application/json", strings.NewReader(`{"product_id":"sku-drain","quantity":1}`))
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	})
	waitIdleInTransaction(t, pg) // the sale has locked its row and is inside its 700ms of work
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	wg.Wait()
	if got := <-status; got != 200 {
		t.Errorf("in-flight sale during shutdown answered %d, want 200 (drained, not cut off)", got)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("server still answers after shutdown")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// waitIdleInTransaction waits until a session of the database at pgURL sits
// idle inside a transaction: a sale holding its row while it works.
func waitIdleInTransaction(t *testing.T, pgURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to %s: %v", pgURL, err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		err := conn.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'
			  AND application_name <> $1`, settings.ApplicationName).Scan(&n)
		if err != nil {
			t.Fatalf("read pg_stat_activity: %v", err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sale transaction was open within 15s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestADefaultSwitchSurvivesRedisLosingItAndARestart(t *testing.T) {
	pg := testenv.PostgresURL(t)
	base, stop := startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg})
	req, _ := http.NewRequest("PUT", base+"/strategy", strings.NewReader(`{"strategy":"optimistic"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT /strategy optimistic = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	if err := stop(); err != nil {
		t.Fatalf("run after cancel = %v", err)
	}

	// startService takes the test Redis flushed: every key lost. The
	// restarted replica is configured with reentrant, yet must keep the switch.
	base, _ = startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg})
	resp, err = http.Get(base + "/strategy")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Strategy string }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Strategy != "optimistic" {
		t.Errorf("GET /strategy after the switch, Redis flushed and a restart = %q, %v; want optimistic", got.Strategy, err)
	}
}

// TestABuyerBeyondMaxWaitingIsTurnedAwayAtOnce: with INVENTORY_MAX_WAITING=1
// and one sale of a product inside its work, the next buyer of that product
// gets 503 overloaded with Retry-After at once, and nothing is sold for it.
func TestABuyerBeyondMaxWaitingIsTurnedAwayAtOnce(t *testing.T) {
	pg := testenv.PostgresURL(t)
	base, _ := startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg, "INVENTORY_MAX_WAITING": "1",
		"INVENTORY_WORK_DELAY": "2s", "INVENTORY_LOCK_TTL": "10s", "INVENTORY_STRATEGY": "forupdate"})
	put, _ := http.NewRequest("PUT", base+"/products/sku-busy", strings.NewReader(`{"quantity":10}`))
	put.Header.Set("Content-Type", "application/json")
	put.Header.Set("Authorization", "Bearer tok")
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT product: %v %v", resp, err)
	}
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(base+"/sale", "application/json", strings.NewReader(`{"product_id":"sku-busy","quantity":1}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	waitIdleInTransaction(t, pg) // the first buyer is inside its 2s of work
	resp, err := http.Post(base+"/sale", "application/json", strings.NewReader(`{"product_id":"sku-busy","quantity":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Type string }
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 503 || p.Type != "urn:inventory:problem:overloaded" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second buyer while one waits = %d %s, Retry-After %q; want 503 overloaded with Retry-After",
			resp.StatusCode, p.Type, resp.Header.Get("Retry-After"))
	}
	if got := <-first; got != 200 {
		t.Errorf("first buyer = %d, want 200", got)
	}
	resp, err = http.Get(base + "/products/sku-busy")
	if err != nil {
		t.Fatal(err)
	}
	var prod struct{ Quantity, Sold int64 }
	_ = json.NewDecoder(resp.Body).Decode(&prod)
	resp.Body.Close()
	if prod.Quantity != 9 || prod.Sold != 1 {
		t.Errorf("after one sale and one turned away: quantity %d, sold %d; want 9 and 1", prod.Quantity, prod.Sold)
	}
}

// first is list's first element, nil if it has none.
func first(list []any) any {
	if len(list) == 0 {
		return nil
	}
	return list[0]
}
