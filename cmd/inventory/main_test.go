package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/client"
	"inventory/internal/localstack"
	"inventory/internal/testenv"
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
		{"INVENTORY_PRODUCT_CACHE", "on", `INVENTORY_PRODUCT_CACHE: want lock (the default), nolock (to show the stampede) or off, got "on"`},
		{"INVENTORY_PRODUCT_CACHE_TTL", "5ms", "INVENTORY_PRODUCT_CACHE_TTL: must be between 10ms and 10s (how old a cached product read may be), got 5ms"},
		{"INVENTORY_PRODUCT_CACHE_TTL", "1m", "INVENTORY_PRODUCT_CACHE_TTL: must be between 10ms and 10s"},
		{"INVENTORY_PRODUCT_CACHE_TTL", "soon", "INVENTORY_PRODUCT_CACHE_TTL"},
		{"INVENTORY_ORDER_LOCK", "magic", `INVENTORY_ORDER_LOCK: unknown strategy "magic" (want none (no lock) or a strategy whose lock serialises an order's steps: setnx, redis,`},
		{"INVENTORY_ORDER_LOCK", "atomic", `INVENTORY_ORDER_LOCK: strategy "atomic" takes no lock of a lock backend`},
		{"INVENTORY_ORDER_LOCK", "local", `INVENTORY_ORDER_LOCK: strategy "local" takes no lock of a lock backend`},
		{"INVENTORY_ORDER_LOCK", "zookeeper", `INVENTORY_ORDER_LOCK: strategy "zookeeper" needs INVENTORY_ZOOKEEPER_SERVERS, which is not set`},
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
	_, probe := clients(base)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := probe.Readyz(ctx); err == nil {
			break
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

// clients are clients of the service at base: with the admin token, and
// without.
func clients(base string) (admin, buyer *client.Client) {
	return client.New(base, client.Options{AdminToken: "tok", HTTPClient: http.DefaultClient}),
		client.New(base, client.Options{HTTPClient: http.DefaultClient})
}

func TestEndToEndThroughRun(t *testing.T) {
	base, stop := startService(t, nil)
	admin, buyer := clients(base)
	ctx := context.Background()
	if p, err := admin.Restock(ctx, "sku-e2e", client.RestockRequest{Quantity: 2, Name: "e2e"}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-e2e = %+v, %v; want it created", p, err)
	}
	sale, err := buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-e2e", Quantity: 1}, client.SaleOptions{})
	if err != nil || sale.Strategy != "reentrant" || sale.Remaining != 1 || sale.Round != 1 || sale.Instance != "e2e-1" {
		t.Errorf("sale = %+v, %v; want strategy reentrant (the configured default), remaining 1, round 1, by e2e-1", sale, err)
	}
	_, err = admin.Sell(ctx, client.SaleRequest{ProductID: "sku-e2e", Quantity: 2}, client.SaleOptions{Strategy: "atomic"})
	if p := (*client.Problem)(nil); !errors.As(err, &p) || p.Status != 409 || p.Instance != "e2e-1" {
		t.Errorf("POST /sale?strategy=atomic of 2 with 1 left = %v, want 409 from e2e-1", err)
	}
	_, err = buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-e2e", Quantity: 1}, client.SaleOptions{Strategy: "atomic"})
	if client.StatusOf(err) != 401 {
		t.Errorf("anonymous POST /sale?strategy=atomic = %v; want 401", err)
	}
	if r, err := buyer.Round(ctx, "sku-e2e", 1); err != nil || r.Initial != 2 || r.Sold != 1 || !r.Current {
		t.Errorf("round 1 = %+v, %v; want initial 2, sold 1, current", r, err)
	}
	if p, err := buyer.Product(ctx, "sku-e2e"); err != nil || p.Quantity != 1 || p.Sold != 1 || p.Sales != 1 {
		t.Errorf("product = %+v, %v; want quantity 1, sold 1, sales 1", p, err)
	}
	// The replica records its lock holds: the reentrant sale's, not atomic's.
	h, err := admin.Holds(ctx, "sku-e2e")
	if err != nil || h.Instance != "e2e-1" || len(h.Holds) != 1 || h.Holds[0].Strategy != "reentrant" || h.Holds[0].Outcome != "sold" {
		t.Errorf("holds = %+v, %v; want the one reentrant hold of e2e-1, sold", h, err)
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}

// TestTheProductCacheThroughRun: the service reads products through the
// cache INVENTORY_PRODUCT_CACHE names, within INVENTORY_PRODUCT_CACHE_TTL,
// exact for the client's own reads, a restock's round at once.
func TestTheProductCacheThroughRun(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		cached bool // whether an anonymous read after a sale shows the stock before it
	}{{"lock", true}, {"nolock", true}, {"off", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			base, stop := startService(t, map[string]string{"INVENTORY_PRODUCT_CACHE": tc.mode, "INVENTORY_PRODUCT_CACHE_TTL": "10s"})
			admin, buyer := clients(base)
			ctx := context.Background()
			if _, err := admin.Restock(ctx, "sku-c", client.RestockRequest{Quantity: 3}); err != nil {
				t.Fatal(err)
			}
			if p, err := buyer.ProductCached(ctx, "sku-c"); err != nil || p.Quantity != 3 {
				t.Fatalf("GET /products/sku-c = %+v, %v; want 3 units", p, err)
			}
			if _, err := buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-c", Quantity: 1}, client.SaleOptions{}); err != nil {
				t.Fatal(err)
			}
			want := int64(2)
			if tc.cached {
				want = 3
			}
			if p, err := buyer.ProductCached(ctx, "sku-c"); err != nil || p.Quantity != want {
				t.Errorf("anonymous GET after a sale = %+v, %v; want %d units", p, err, want)
			}
			if p, err := buyer.Product(ctx, "sku-c"); err != nil || p.Quantity != 2 {
				t.Errorf("GET with Cache-Control: no-cache = %+v, %v; want the exact 2 units", p, err)
			}
			if _, err := admin.Restock(ctx, "sku-c", client.RestockRequest{Quantity: 7}); err != nil {
				t.Fatal(err)
			}
			if p, err := buyer.ProductCached(ctx, "sku-c"); err != nil || p.Quantity != 7 || p.Round != 2 {
				t.Errorf("anonymous GET after a restock = %+v, %v; want 7 units of round 2", p, err)
			}
			m, err := buyer.Metrics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if hit := `inventory_product_reads_total{source="cache"} 1`; tc.cached != strings.Contains(string(m), hit) {
				t.Errorf("/metrics has %s: %v, want %v", hit, !tc.cached, tc.cached)
			}
			if err := stop(); err != nil {
				t.Errorf("run after cancel = %v, want nil", err)
			}
		})
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
	admin, buyer := clients(base)
	ctx := context.Background()
	if p, err := admin.Restock(ctx, "sku-etcd", client.RestockRequest{Quantity: 2, Name: "etcd"}); err != nil || p.Round != 1 {
		t.Fatalf("PUT /products/sku-etcd = %+v, %v; want it created", p, err)
	}
	if sale, err := buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-etcd", Quantity: 1}, client.SaleOptions{}); err != nil || sale.Strategy != "etcd" {
		t.Errorf("POST /sale with the etcd default = %+v, %v; want sold by etcd", sale, err)
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}

func TestShutdownDrainsInFlightSales(t *testing.T) {
	pg := testenv.PostgresURL(t)
	base, stop := startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg, "INVENTORY_WORK_DELAY": "700ms", "INVENTORY_STRATEGY": "forupdate"})
	admin, buyer := clients(base)
	ctx := context.Background()
	if _, err := admin.Restock(ctx, "sku-drain", client.RestockRequest{Quantity: 10}); err != nil {
		t.Fatalf("PUT product: %v", err)
	}
	var wg sync.WaitGroup
	sold := make(chan error, 1)
	wg.Go(func() {
		_, err := buyer.Sell(ctx, client.SaleRequest{ProductID: "sku-drain", Quantity: 1}, client.SaleOptions{})
		sold <- err
	})
	waitSaleAtWork(t, pg) // the sale has locked its row and is inside its 700ms of work
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	wg.Wait()
	if err := <-sold; err != nil {
		t.Errorf("in-flight sale during shutdown = %v, want sold (drained, not cut off)", err)
	}
	if _, err := buyer.Healthz(ctx); err == nil {
		t.Errorf("server still answers after shutdown")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// waitSaleAtWork waits until a sale of the database at pgURL holds its row
// while it works (testenv.SalesAtWork).
func waitSaleAtWork(t *testing.T, pgURL string) {
	t.Helper()
	testenv.WaitFor(t, "a sale to hold its row while it works", 15*time.Second, func() bool {
		return testenv.SalesAtWork(t, pgURL) > 0
	})
}

func TestADefaultSwitchSurvivesRedisLosingItAndARestart(t *testing.T) {
	pg := testenv.PostgresURL(t)
	base, stop := startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg})
	admin, _ := clients(base)
	ctx := context.Background()
	if err := admin.SetStrategy(ctx, "optimistic"); err != nil {
		t.Fatalf("PUT /strategy optimistic: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel = %v", err)
	}

	// startService takes the test Redis flushed: every key lost. The
	// restarted replica is configured with reentrant, yet must keep the switch.
	base, _ = startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg})
	_, buyer := clients(base)
	if got, err := buyer.Strategy(ctx); err != nil || got != "optimistic" {
		t.Errorf("GET /strategy after the switch, Redis flushed and a restart = %q, %v; want optimistic", got, err)
	}
}

// TestABuyerBeyondMaxWaitingIsTurnedAwayAtOnce: with INVENTORY_MAX_WAITING=1
// and one sale of a product inside its work, the next buyer of that product
// gets 503 overloaded with Retry-After at once, and nothing is sold for it.
func TestABuyerBeyondMaxWaitingIsTurnedAwayAtOnce(t *testing.T) {
	pg := testenv.PostgresURL(t)
	base, _ := startService(t, map[string]string{"INVENTORY_POSTGRES_URL": pg, "INVENTORY_MAX_WAITING": "1",
		"INVENTORY_WORK_DELAY": "2s", "INVENTORY_LOCK_TTL": "10s", "INVENTORY_STRATEGY": "forupdate"})
	admin, buyer := clients(base)
	ctx := context.Background()
	if _, err := admin.Restock(ctx, "sku-busy", client.RestockRequest{Quantity: 10}); err != nil {
		t.Fatalf("PUT product: %v", err)
	}
	order := client.SaleRequest{ProductID: "sku-busy", Quantity: 1}
	first := make(chan error, 1)
	go func() {
		_, err := buyer.Sell(ctx, order, client.SaleOptions{})
		first <- err
	}()
	waitSaleAtWork(t, pg) // the first buyer is inside its 2s of work
	_, err := buyer.Sell(ctx, order, client.SaleOptions{})
	if p := (*client.Problem)(nil); !errors.As(err, &p) || p.Status != 503 || p.Slug() != "overloaded" || p.RetryAfter == 0 {
		t.Errorf("second buyer while one waits = %v; want 503 overloaded with Retry-After", err)
	}
	if err := <-first; err != nil {
		t.Errorf("first buyer = %v, want sold", err)
	}
	if p, err := buyer.Product(ctx, "sku-busy"); err != nil || p.Quantity != 9 || p.Sold != 1 {
		t.Errorf("after one sale and one turned away: %+v, %v; want quantity 9 and sold 1", p, err)
	}
}

// TestOrderStepsTakeTheConfiguredLock: with INVENTORY_ORDER_LOCK=redis (the
// default) a payment waits for the order's lock in Redis, and one held
// elsewhere past INVENTORY_LOCK_WAIT is 503 lock-timeout, nothing paid;
// with none, the same payment takes no lock and goes through.
func TestOrderStepsTakeTheConfiguredLock(t *testing.T) {
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	for _, tc := range []struct {
		lock   string
		status int
	}{
		{"", 503}, // the default: redis
		{"none", 200},
	} {
		base, stop := startService(t, map[string]string{"INVENTORY_ORDER_LOCK": tc.lock, "INVENTORY_LOCK_WAIT": "300ms"})
		admin, buyer := clients(base)
		if _, err := admin.Restock(ctx, "sku-order", client.RestockRequest{Quantity: 1}); err != nil {
			t.Fatal(err)
		}
		h, err := buyer.Hold(ctx, client.SaleRequest{ProductID: "sku-order", Quantity: 1, PayWithin: "15m"}, client.SaleOptions{})
		if err != nil {
			t.Fatalf("INVENTORY_ORDER_LOCK=%q: Hold = %v", tc.lock, err)
		}
		key := "lock:order:{" + h.OrderID + "}"
		if err := rdb.Set(ctx, key, "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = buyer.Pay(ctx, h.OrderID)
		var p *client.Problem
		if got := client.StatusOf(err); got != tc.status || tc.status == 503 && (!errors.As(err, &p) || p.Slug() != "lock-timeout") {
			t.Errorf("INVENTORY_ORDER_LOCK=%q: Pay with %s held elsewhere = %v; want %d", tc.lock, key, err, tc.status)
		}
		want := map[int]string{503: "held", 200: "paid"}[tc.status]
		if o, err := buyer.Order(ctx, h.OrderID); err != nil || o.State != want {
			t.Errorf("INVENTORY_ORDER_LOCK=%q: the order after the payment = %+v, %v; want it %s", tc.lock, o, err, want)
		}
		if err := rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Errorf("run after cancel = %v, want nil", err)
		}
	}
}

// TestHeldOrdersExpireOnOneReplica: two replicas run the expiry job; one at
// a time sweeps, the held orders past their deadline expire and their
// units come back, and when the runner stops the other one sweeps.
func TestHeldOrdersExpireOnOneReplica(t *testing.T) {
	ctx := context.Background()
	// One Postgres database and one Redis for both replicas, as a fleet has.
	fast := map[string]string{"INVENTORY_ORDER_SWEEP_INTERVAL": "50ms", "INVENTORY_LOCK_TTL": "2s",
		"INVENTORY_POSTGRES_URL": testenv.PostgresURL(t), "INVENTORY_REDIS_URL": testenv.RedisURL(t)}
	baseA, stopA := startService(t, fast)
	second := map[string]string{"INVENTORY_INSTANCE": "e2e-2"}
	maps.Copy(second, fast)
	baseB, stopB := startService(t, second)
	defer func() { _ = stopB() }()
	const id = "sku-expiring"
	admin, _ := clients(baseA)
	if _, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 5}); err != nil {
		t.Fatal(err)
	}
	// expireThrough holds two units through base and waits until the sweep
	// has expired the order; it returns who swept it.
	expireThrough := func(base string) string {
		t.Helper()
		_, buyer := clients(base)
		h, err := buyer.Hold(ctx, client.SaleRequest{ProductID: id, Quantity: 2, PayWithin: "1s"}, client.SaleOptions{})
		if err != nil {
			t.Fatalf("Hold: %v", err)
		}
		var o client.Order
		waitFor(t, "the order to expire", 20*time.Second, func() bool {
			o, err = buyer.Order(ctx, h.OrderID)
			return err == nil && o.State == "expired"
		})
		if p, err := buyer.Product(ctx, id); err != nil || p.Quantity != 5 {
			t.Errorf("after the order expired: %+v, %v; want the 5 units back", p, err)
		}
		if _, err := buyer.Pay(ctx, h.OrderID); client.StatusOf(err) != 409 {
			t.Errorf("Pay of the expired order = %v, want 409 order-expired", err)
		}
		return o.History[len(o.History)-1].By
	}
	runner := expireThrough(baseA)
	if runner != "expiry@e2e-1" && runner != "expiry@e2e-2" {
		t.Fatalf("the order was expired by %q, want expiry@e2e-1 or expiry@e2e-2", runner)
	}
	if again := expireThrough(baseB); again != runner {
		t.Errorf("the next order was expired by %q, the first by %q: want one runner while it lives", again, runner)
	}
	// Stop the runner: it releases the job's lock, and the other sweeps.
	stop, other, base := stopA, "expiry@e2e-2", baseB
	if runner == "expiry@e2e-2" {
		stop, other, base = stopB, "expiry@e2e-1", baseA
	}
	if err := stop(); err != nil {
		t.Fatalf("stop the runner: %v", err)
	}
	if after := expireThrough(base); after != other {
		t.Errorf("after the runner stopped the order was expired by %q, want %q", after, other)
	}
}

// waitFor polls cond until it holds, or fails the test after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExpiryOutlivesRedisLosingItsData: a runner of the expiry job stops
// and another takes over, then Redis loses every key (a restart without
// persistence) while orders are held: each new lease's token is above the
// last one Postgres recorded for the job (postgres.Store.FenceFloor), so
// the fence can tell every runner from the one before, and the held
// orders still expire. Read from the job's own floor, a counter started
// afresh minted 1 every time ([1 1 1]): no runner fenced off from another.
func TestExpiryOutlivesRedisLosingItsData(t *testing.T) {
	ctx := context.Background()
	redisURL := testenv.RedisURL(t)
	env := map[string]string{"INVENTORY_ORDER_SWEEP_INTERVAL": "50ms", "INVENTORY_LOCK_TTL": "2s",
		"INVENTORY_POSTGRES_URL": testenv.PostgresURL(t), "INVENTORY_REDIS_URL": redisURL}
	first, stopFirst := startService(t, env)
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	admin, buyer := clients(first)
	const id = "sku-redis-lost"
	if _, err := admin.Restock(ctx, id, client.RestockRequest{Quantity: 3}); err != nil {
		t.Fatal(err)
	}
	expire := func() {
		t.Helper()
		h, err := buyer.Hold(ctx, client.SaleRequest{ProductID: id, Quantity: 1, PayWithin: "1s"}, client.SaleOptions{})
		if err != nil {
			t.Fatalf("Hold: %v", err)
		}
		waitFor(t, "the order to expire", 20*time.Second, func() bool {
			o, err := buyer.Order(ctx, h.OrderID)
			return err == nil && o.State == "expired"
		})
	}
	expire() // the first runner has claimed the job's fence in Postgres
	// A second runner, with the next token: the fence recorded is above
	// what a counter started afresh would mint first.
	if err := stopFirst(); err != nil {
		t.Fatal(err)
	}
	second, _ := startService(t, env)
	_, buyer = clients(second)
	expire()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	expire()
	if p, err := buyer.Product(ctx, id); err != nil || p.Quantity != 3 {
		t.Errorf("after the three orders expired: %+v, %v; want the 3 units back", p, err)
	}
	// Each runner's token is above the one before: the second's above the
	// first's (recorded in Postgres, the floor of a lock released), the
	// one after the flush above the second's (the floor of a counter lost).
	pool, err := pgxpool.New(ctx, env["INVENTORY_POSTGRES_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT fence FROM order_events WHERE state = 'expired' ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	fences, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(fences) != 3 || fences[0] >= fences[1] || fences[1] >= fences[2] {
		t.Errorf("the expiries' fencing tokens = %v, %v; want three, each above the one before", fences, err)
	}
}
