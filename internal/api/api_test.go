package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/pglock"
	"inventory/internal/lock/redislock"
	"inventory/internal/metrics"
	"inventory/internal/postgres"
	"inventory/internal/settings"
	"inventory/internal/stock"
	"inventory/internal/testenv"
	"inventory/internal/watchdog"
	"inventory/internal/wire"
	"inventory/migrations"
)

// TestMain runs the tests, then (on a full, passing run) checks that they
// saw every answer the OpenAPI description documents.
func TestMain(m *testing.M) {
	code := testenv.Run(m)
	if code == 0 && fullRun() {
		code = checkSpecCoverage(os.Stderr)
	}
	os.Exit(code)
}

const adminToken = "s3cret-token"

// fixture is one API server on real Postgres and Redis.
type fixture struct {
	t       testing.TB
	url     string
	handler http.Handler // NewServer's, unwrapped
	store   *postgres.Store
	rdb     *redis.Client
	// holds is the server's log of lock holds, which its sellers record in.
	holds *stock.HoldLog
	pool  *pgxpool.Pool
	// circuits is the server's sale circuits, which a watchdog on pool opens.
	circuits *watchdog.Circuits
}

// newFixture starts the server; tweaks change its Config first (a test's
// own seller, say).
func newFixture(t testing.TB, adminToken string, tweaks ...func(*Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	_ = db.Close()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	metrics.RegisterPools(reg, pool, rdb)
	store := postgres.NewStore(pool, postgres.Limits{})
	holds := stock.NewHoldLog(1000)
	lockOpts := lock.Options{TTL: 5 * time.Second, Wait: 200 * time.Millisecond, Observer: m}
	deps := stock.Deps{Store: store, Redis: rdb, Instance: "test-1",
		Lockers: testLockers(t, pool, rdb, store, lockOpts), Wait: lockOpts.Wait, Holds: holds}
	sellers := map[string]inventory.Seller{}
	// No lock service of its own is configured here: the strategies that
	// need one are unavailable (see TestStrategyUnavailable).
	for _, name := range inventory.Names() {
		s, err := stock.New(name, deps)
		if errors.Is(err, inventory.ErrNotConfigured) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sellers[name] = s
	}
	def := settings.NewStrategy(pool, func(n string) error { _, err := inventory.Lookup(n); return err }, settings.Options{})
	if err := def.Init(ctx, inventory.Atomic); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sellers: sellers, Store: store, Redis: rdb, Default: def, Instance: "test-1",
		AdminToken: adminToken, MaxQuantity: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m, Gatherer: reg,
		Holds: holds, Circuits: watchdog.NewCircuits(pool)}
	circuits := cfg.Circuits
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	h, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	// Every exchange of every test is checked against openapi.yaml.
	srv := httptest.NewServer(specChecker(t).Handler(t, h))
	t.Cleanup(srv.Close)
	return &fixture{t: t, url: srv.URL, handler: h, store: store, rdb: rdb, holds: holds, pool: pool, circuits: circuits}
}

// testLockers are the lockers of the lock strategies in Redis and Postgres,
// built with opts as cmd/inventory builds them; the strategies that need
// a lock service of their own get none.
func testLockers(t testing.TB, pool *pgxpool.Pool, rdb redis.UniversalClient, store *postgres.Store, opts lock.Options) map[string]lock.Locker {
	// Redis's fencing counters restart above what Postgres has seen of
	// their counter (a lock.Fence's Backend).
	redisOpts := func(counter string, watchdog bool) redislock.Options {
		return redislock.Options{Options: opts, Watchdog: watchdog, FenceFloor: store.FenceFloor(counter)}
	}
	mutex := redislock.NewMutex(rdb, redisOpts(redislock.Backend, false))
	handoff := redislock.NewMutex(rdb, redisOpts(redislock.Backend, false))
	reentrant := redislock.NewReentrant(rdb, redisOpts(redislock.Backend, true))
	fair := redislock.NewFair(rdb, redisOpts(redislock.FairBackend, true))
	for _, c := range []func(){mutex.Close, handoff.Close, reentrant.Close, fair.Close} {
		t.Cleanup(c)
	}
	return map[string]lock.Locker{
		inventory.SetNX:     redislock.NewSetNX(rdb, redislock.Options{Options: opts}).Locker(),
		inventory.RedisLock: mutex,
		inventory.Handoff:   handoff,
		inventory.Reentrant: reentrant,
		inventory.Fair:      fair,
		inventory.PgLock:    pglock.New(pool, pglock.Options{Options: opts}),
	}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (f *fixture) do(method, path, contentType, body string, header ...string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (f *fixture) restock(id string, quantity int64) {
	f.t.Helper()
	if _, err := stock.Restock(context.Background(), f.store, f.rdb, id, "", quantity); err != nil {
		f.t.Fatalf("Restock(%s, %d): %v", id, quantity, err)
	}
}

func (f *fixture) product(id string) inventory.Product {
	f.t.Helper()
	p, err := f.store.Product(context.Background(), id)
	if err != nil {
		f.t.Fatalf("Product(%s): %v", id, err)
	}
	return p
}

const jsonType = "application/json"

// admin is the header that makes a call an admin's.
var admin = []string{"Authorization", "Bearer " + adminToken}

func TestBadSaleRequestsAreRefusedAndChangeNothing(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 5)
	before := f.product("sku-1")

	cases := []struct {
		name, path, contentType, body string
		header                        []string
		status                        int
		problem                       string
	}{
		{"broken JSON", "/sale", jsonType, `{"product_id":"sku-1",`, nil, 400, "malformed-request"},
		{"trailing data", "/sale", jsonType, `{"product_id":"sku-1","quantity":1} x`, nil, 400, "malformed-request"},
		{"two objects", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}{"product_id":"sku-1","quantity":1}`, nil, 400, "malformed-request"},
		{"unknown field", "/sale", jsonType, `{"product_id":"sku-1","quantity":1,"price":0}`, nil, 400, "malformed-request"},
		{"missing product_id", "/sale", jsonType, `{"quantity":1}`, nil, 400, "malformed-request"},
		{"missing quantity", "/sale", jsonType, `{"product_id":"sku-1"}`, nil, 400, "malformed-request"},
		{"null quantity", "/sale", jsonType, `{"product_id":"sku-1","quantity":null}`, nil, 400, "malformed-request"},
		{"empty body", "/sale", jsonType, ``, nil, 400, "malformed-request"},
		{"array body", "/sale", jsonType, `[]`, nil, 400, "malformed-request"},
		{"zero quantity", "/sale", jsonType, `{"product_id":"sku-1","quantity":0}`, nil, 400, "bad-quantity"},
		{"negative quantity", "/sale", jsonType, `{"product_id":"sku-1","quantity":-1}`, nil, 400, "bad-quantity"},
		{"fractional quantity", "/sale", jsonType, `{"product_id":"sku-1","quantity":1.5}`, nil, 400, "malformed-request"},
		{"string quantity", "/sale", jsonType, `{"product_id":"sku-1","quantity":"1"}`, nil, 400, "malformed-request"},
		{"huge quantity", "/sale", jsonType, `{"product_id":"sku-1","quantity":1e30}`, nil, 400, "malformed-request"},
		{"above the per-order max", "/sale", jsonType, `{"product_id":"sku-1","quantity":11}`, nil, 400, "bad-quantity"},
		{"empty product id", "/sale", jsonType, `{"product_id":"","quantity":1}`, nil, 400, "bad-product-id"},
		{"overlong product id", "/sale", jsonType, `{"product_id":"` + strings.Repeat("a", 65) + `","quantity":1}`, nil, 400, "bad-product-id"},
		{"product id with a space", "/sale", jsonType, `{"product_id":"sku 1","quantity":1}`, nil, 400, "bad-product-id"},
		{"product id with a slash", "/sale", jsonType, `{"product_id":"../sku-1","quantity":1}`, nil, 400, "bad-product-id"},
		{"product id with a brace", "/sale", jsonType, `{"product_id":"sku}{1","quantity":1}`, nil, 400, "bad-product-id"},
		{"non-ASCII product id", "/sale", jsonType, `{"product_id":"skü-1","quantity":1}`, nil, 400, "bad-product-id"},
		{"unknown product", "/sale", jsonType, `{"product_id":"sku-404","quantity":1}`, nil, 404, "product-not-found"},
		{"unknown strategy", "/sale?strategy=magic", jsonType, `{"product_id":"sku-1","quantity":1}`, admin, 400, "unknown-strategy"},
		{"strategy given twice", "/sale?strategy=atomic&strategy=none", jsonType, `{"product_id":"sku-1","quantity":1}`, admin, 400, "malformed-request"},
		{"mangled query", "/sale?strategy=%zz", jsonType, `{"product_id":"sku-1","quantity":1}`, admin, 400, "malformed-request"},
		{"strategy without the admin token", "/sale?strategy=none", jsonType, `{"product_id":"sku-1","quantity":1}`, nil, 401, "unauthorized"},
		{"text content type", "/sale", "text/plain", `{"product_id":"sku-1","quantity":1}`, nil, 415, "unsupported-media-type"},
		{"no content type", "/sale", "", `{"product_id":"sku-1","quantity":1}`, nil, 415, "unsupported-media-type"},
		{"oversized body", "/sale", jsonType, `{"product_id":"sku-1","quantity":1,"pad":"` + strings.Repeat("x", 5000) + `"}`, nil, 413, "body-too-large"},
		{"overlong idempotency key", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "malformed-request"},
		{"idempotency key with a space", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`, []string{"Idempotency-Key", "a b"}, 400, "malformed-request"},
		// The same sale with the product in the path.
		{"path: product_id in the body too", "/products/sku-1/sale", jsonType, `{"product_id":"sku-1","quantity":1}`, nil, 400, "malformed-request"},
		{"path: missing quantity", "/products/sku-1/sale", jsonType, `{}`, nil, 400, "malformed-request"},
		{"path: zero quantity", "/products/sku-1/sale", jsonType, `{"quantity":0}`, nil, 400, "bad-quantity"},
		{"path: bad product id", "/products/sku%201/sale", jsonType, `{"quantity":1}`, nil, 400, "bad-product-id"},
		{"path: unknown product", "/products/sku-404/sale", jsonType, `{"quantity":1}`, nil, 404, "product-not-found"},
		{"path: strategy without the admin token", "/products/sku-1/sale?strategy=none", jsonType, `{"quantity":1}`, nil, 401, "unauthorized"},
		{"path: text content type", "/products/sku-1/sale", "text/plain", `{"quantity":1}`, nil, 415, "unsupported-media-type"},
		{"path: bad idempotency key", "/products/sku-1/sale", jsonType, `{"quantity":1}`, []string{"Idempotency-Key", "a b"}, 400, "malformed-request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do("POST", tc.path, tc.contentType, tc.body, tc.header...)
			if r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem {
				t.Fatalf("POST %s %s = %d %v, want %d %s", tc.path, tc.body, r.status, r.raw, tc.status, tc.problem)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", ct)
			}
			if r.body["detail"] == "" || r.body["status"] != float64(tc.status) {
				t.Errorf("problem body %s lacks detail or status", r.raw)
			}
		})
	}
	after := f.product("sku-1")
	if after != before {
		t.Errorf("bad requests changed the product: before %+v, after %+v", before, after)
	}
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	f := newFixture(t, adminToken)
	r := f.do("GET", "/sale", "", "")
	if r.status != 405 || r.header.Get("Allow") != "POST" || r.body["type"] != problemTypePrefix+"method-not-allowed" {
		t.Errorf("GET /sale = %d Allow=%q %s, want 405 Allow=POST method-not-allowed", r.status, r.header.Get("Allow"), r.raw)
	}
	r = f.do("DELETE", "/products/sku-1", "", "")
	if r.status != 405 || !strings.Contains(r.header.Get("Allow"), "PUT") {
		t.Errorf("DELETE /products/sku-1 = %d Allow=%q, want 405 listing PUT", r.status, r.header.Get("Allow"))
	}
	if r := f.do("GET", "/nope", "", ""); r.status != 404 || r.body["type"] != problemTypePrefix+"not-found" {
		t.Errorf("GET /nope = %d %s, want 404 not-found", r.status, r.raw)
	}
}

func TestSaleSellsAndSaysWhoSold(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 3)
	for _, info := range inventory.Strategies {
		strategy := info.Name
		if info.Needs != "" { // not configured in the fixture: see TestStrategyUnavailable
			continue
		}
		f.restock("sku-1", 3)
		r := f.do("POST", "/sale?strategy="+strategy, jsonType, `{"product_id":"sku-1","quantity":2}`, "X-Request-ID", "req-"+strategy, admin[0], admin[1])
		if r.status != 200 {
			t.Fatalf("POST /sale?strategy=%s = %d %s, want 200", strategy, r.status, r.raw)
		}
		round := float64(f.product("sku-1").Round)
		want := map[string]any{"product_id": "sku-1", "quantity": float64(2), "remaining": float64(1), "round": round, "strategy": strategy, "instance": "test-1"}
		for k, v := range want {
			if r.body[k] != v {
				t.Errorf("POST /sale?strategy=%s: %s = %v, want %v (body %s)", strategy, k, r.body[k], v, r.raw)
			}
		}
		if id, _ := r.body["sale_id"].(float64); id <= 0 {
			t.Errorf("POST /sale?strategy=%s: sale_id = %v, want a positive id", strategy, r.body["sale_id"])
		}
		if got := r.header.Get("X-Instance"); got != "test-1" {
			t.Errorf("X-Instance = %q, want test-1", got)
		}
		if got := r.header.Get("X-Request-ID"); got != "req-"+strategy {
			t.Errorf("X-Request-ID = %q, want the incoming req-%s", got, strategy)
		}
		r = f.do("POST", "/sale?strategy="+strategy, jsonType, `{"product_id":"sku-1","quantity":2}`, admin...)
		if r.status != 409 || r.body["type"] != problemTypePrefix+"sold-out" {
			t.Errorf("POST /sale?strategy=%s with 1 left, buying 2 = %d %s, want 409 sold-out", strategy, r.status, r.raw)
		}
	}
}

// TestSaleByProductPath: POST /products/{id}/sale sells like POST /sale,
// with the fleet default or a named strategy, and replays by key.
func TestSaleByProductPath(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 3)
	r := f.do("POST", "/products/sku-1/sale", jsonType, `{"quantity":2}`, "Idempotency-Key", "path-1")
	if r.status != 200 || r.body["product_id"] != "sku-1" || r.body["remaining"] != float64(1) {
		t.Fatalf("POST /products/sku-1/sale = %d %s, want 200 leaving 1", r.status, r.raw)
	}
	again := f.do("POST", "/products/sku-1/sale", jsonType, `{"quantity":2}`, "Idempotency-Key", "path-1")
	if again.status != 200 || again.body["sale_id"] != r.body["sale_id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same key again = %d %s, want a replay of sale %v", again.status, again.raw, r.body["sale_id"])
	}
	named := f.do("POST", "/products/sku-1/sale?strategy=atomic", jsonType, `{"quantity":1}`, admin...)
	if named.status != 200 || named.body["strategy"] != "atomic" || named.body["remaining"] != float64(0) {
		t.Errorf("POST /products/sku-1/sale?strategy=atomic = %d %s, want 200 by atomic leaving 0", named.status, named.raw)
	}
	if r := f.do("POST", "/products/sku-1/sale", jsonType, `{"quantity":1}`); r.status != 409 || r.body["type"] != problemTypePrefix+"sold-out" {
		t.Errorf("POST /products/sku-1/sale when sold out = %d %s, want 409 sold-out", r.status, r.raw)
	}
	if p := f.product("sku-1"); p.Quantity != 0 || p.Sales != 2 {
		t.Errorf("after two sales by path and a replay: stock %d, %d ledger rows; want 0, 2", p.Quantity, p.Sales)
	}
}

func TestIdempotencyKeyReplaysTheOriginalSale(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 10)
	first := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":2}`, "Idempotency-Key", "order-42")
	again := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":2}`, "Idempotency-Key", "order-42")
	if first.status != 200 || again.status != 200 || first.body["sale_id"] != again.body["sale_id"] {
		t.Fatalf("two POSTs with one key = %d %s and %d %s, want 200 with the same sale_id", first.status, first.raw, again.status, again.raw)
	}
	if again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay lacks Idempotent-Replayed: true")
	}
	if p := f.product("sku-1"); p.Quantity != 8 || p.Sales != 1 {
		t.Errorf("after a sale and its replay: quantity %d, ledger rows %d; want 8 and 1", p.Quantity, p.Sales)
	}
	other := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":3}`, "Idempotency-Key", "order-42")
	if other.status != 422 || other.body["type"] != problemTypePrefix+"idempotency-key-reused" {
		t.Errorf("same key, other quantity = %d %s, want 422 idempotency-key-reused", other.status, other.raw)
	}
	if p := f.product("sku-1"); p.Quantity != 8 {
		t.Errorf("the refused reuse changed stock to %d, want 8", p.Quantity)
	}
}

func TestLockWaitTimeoutIs503WithRetryAfter(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 10)
	// Someone else holds the product's lock for longer than the 200ms wait.
	if err := f.rdb.Set(context.Background(), "lock:{sku-1}", "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	r := f.do("POST", "/sale?strategy=redis", jsonType, `{"product_id":"sku-1","quantity":1}`, admin...)
	if r.status != 503 || r.header.Get("Retry-After") == "" || r.body["type"] != problemTypePrefix+"lock-timeout" {
		t.Errorf("POST /sale?strategy=redis with the lock held elsewhere = %d Retry-After=%q %s, want 503 lock-timeout with Retry-After",
			r.status, r.header.Get("Retry-After"), r.raw)
	}
	if p := f.product("sku-1"); p.Quantity != 10 {
		t.Errorf("a timed-out sale changed stock to %d, want 10", p.Quantity)
	}
}

func TestProducts(t *testing.T) {
	f := newFixture(t, adminToken)
	auth := []string{"Authorization", "Bearer " + adminToken}

	r := f.do("PUT", "/products/sku-9", jsonType, `{"quantity":7,"name":"Hot thing"}`, auth...)
	if r.status != 201 || r.header.Get("Location") != "/products/sku-9" {
		t.Fatalf("PUT new product = %d Location=%q %s, want 201 with Location", r.status, r.header.Get("Location"), r.raw)
	}
	f.do("POST", "/sale", jsonType, `{"product_id":"sku-9","quantity":3}`)
	r = f.do("GET", "/products/sku-9", "", "")
	want := map[string]any{"product_id": "sku-9", "name": "Hot thing", "quantity": float64(4), "initial": float64(7), "sold": float64(3), "sales": float64(1), "round": float64(1)}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("GET /products/sku-9: %s = %v, want %v (%s)", k, r.body[k], v, r.raw)
		}
	}
	r = f.do("PUT", "/products/sku-9", jsonType, `{"quantity":100}`, auth...)
	if r.status != 200 || r.body["round"] != float64(2) || r.body["sold"] != float64(0) || r.body["name"] != "Hot thing" || r.body["quantity"] != float64(100) {
		t.Errorf("restock = %d %s, want 200, round 2, sold 0, name kept, quantity 100", r.status, r.raw)
	}

	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		problem                  string
	}{
		{"unknown product", "GET", "/products/sku-404", "", nil, 404, "product-not-found"},
		{"bad id", "GET", "/products/sku%20x", "", nil, 400, "bad-product-id"},
		{"no token", "PUT", "/products/sku-9", `{"quantity":1}`, nil, 401, "unauthorized"},
		{"wrong token", "PUT", "/products/sku-9", `{"quantity":1}`, []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"basic auth", "PUT", "/products/sku-9", `{"quantity":1}`, []string{"Authorization", "Basic " + adminToken}, 401, "unauthorized"},
		{"negative restock", "PUT", "/products/sku-9", `{"quantity":-1}`, auth, 400, "bad-quantity"},
		{"restock without quantity", "PUT", "/products/sku-9", `{"name":"x"}`, auth, 400, "malformed-request"},
		{"restock bad id", "PUT", "/products/a%2Fb", `{"quantity":1}`, auth, 400, "bad-product-id"},
	} {
		r := f.do(tc.method, tc.path, jsonType, tc.body, tc.header...)
		if r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem {
			t.Errorf("%s: %s %s = %d %s, want %d %s", tc.name, tc.method, tc.path, r.status, r.raw, tc.status, tc.problem)
		}
	}
	if r := f.do("PUT", "/products/sku-9", jsonType, `{"quantity":1}`); r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("401 without WWW-Authenticate")
	}
	if p := f.product("sku-9"); p.Quantity != 100 || p.Round != 2 {
		t.Errorf("refused admin calls changed the product: %+v", p)
	}
}

// TestRestockIsSafeToRetry: a restock repeated with its Idempotency-Key
// answers the first one's result (same round, Idempotent-Replayed) and
// starts no round, while sales went on between the two; the key with another
// body is 422. With If-Match, the round a GET's ETag showed, a repeat after
// the round moved is 412 round-moved and changes nothing; a malformed
// If-Match is 400. Before, every PUT started a round: a retry put back the
// units sold in between.
func TestRestockIsSafeToRetry(t *testing.T) {
	f := newFixture(t, adminToken)
	keyed := append([]string{"Idempotency-Key", "restock-1"}, admin...)
	first := f.do("PUT", "/products/sku-r", jsonType, `{"quantity":5,"name":"Retry"}`, keyed...)
	if first.status != 201 || first.header.Get("ETag") != `"1"` {
		t.Fatalf("PUT new product with a key = %d ETag=%q %s, want 201 with ETag \"1\"", first.status, first.header.Get("ETag"), first.raw)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-r","quantity":2}`); r.status != 200 {
		t.Fatalf("sale = %d %s", r.status, r.raw)
	}
	again := f.do("PUT", "/products/sku-r", jsonType, `{"quantity":5,"name":"Retry"}`, keyed...)
	if again.status != first.status || again.raw != first.raw || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same PUT again = %d %s (replayed %q), want the first answer %d %s, replayed", again.status, again.raw,
			again.header.Get("Idempotent-Replayed"), first.status, first.raw)
	}
	if p := f.product("sku-r"); p.Round != 1 || p.Quantity != 3 {
		t.Errorf("after the repeated restock: round %d, quantity %d; want round 1 and the 3 left after the sale", p.Round, p.Quantity)
	}
	if r := f.do("PUT", "/products/sku-r", jsonType, `{"quantity":6,"name":"Retry"}`, keyed...); r.status != 422 || r.body["type"] != problemTypePrefix+"idempotency-key-reused" {
		t.Errorf("the key with another quantity = %d %s, want 422 idempotency-key-reused", r.status, r.raw)
	}

	etag := f.do("GET", "/products/sku-r", "", "").header.Get("ETag")
	if etag != `"1"` {
		t.Fatalf("GET ETag = %q, want \"1\"", etag)
	}
	ifMatch := append([]string{"If-Match", etag}, admin...)
	if r := f.do("PUT", "/products/sku-r", jsonType, `{"quantity":10}`, ifMatch...); r.status != 200 || r.body["round"] != float64(2) || r.header.Get("ETag") != `"2"` {
		t.Fatalf("PUT If-Match %s = %d ETag=%q %s, want 200 in round 2", etag, r.status, r.header.Get("ETag"), r.raw)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-r","quantity":4}`); r.status != 200 {
		t.Fatalf("sale = %d %s", r.status, r.raw)
	}
	if r := f.do("PUT", "/products/sku-r", jsonType, `{"quantity":10}`, ifMatch...); r.status != 412 || r.body["type"] != problemTypePrefix+"round-moved" {
		t.Errorf("the same PUT If-Match %s again = %d %s, want 412 round-moved", etag, r.status, r.raw)
	}
	if r := f.do("PUT", "/products/sku-new", jsonType, `{"quantity":10}`, ifMatch...); r.status != 412 || r.body["type"] != problemTypePrefix+"round-moved" {
		t.Errorf("PUT If-Match %s on a product that does not exist = %d %s, want 412 round-moved", etag, r.status, r.raw)
	}
	for _, bad := range []string{`*`, `W/"2"`, `2`, `"2", "3"`, `"0"`, `"02"`, `"x"`, `""`} {
		if r := f.do("PUT", "/products/sku-r", jsonType, `{"quantity":10}`, append([]string{"If-Match", bad}, admin...)...); r.status != 400 || r.body["type"] != problemTypePrefix+"malformed-request" {
			t.Errorf("PUT If-Match %s = %d %s, want 400 malformed-request", bad, r.status, r.raw)
		}
	}
	if p := f.product("sku-r"); p.Round != 2 || p.Quantity != 6 {
		t.Errorf("after the refused restocks: round %d, quantity %d; want round 2 and the 6 left after the sale", p.Round, p.Quantity)
	}
	if _, err := f.store.Product(context.Background(), "sku-new"); !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("a refused If-Match created sku-new: %v", err)
	}
}

func TestAdminCallsRefusedWithoutAConfiguredToken(t *testing.T) {
	f := newFixture(t, "")
	for _, call := range [][2]string{{"/products/sku-1", `{"quantity":5}`}, {"/strategy", `{"strategy":"none"}`}} {
		r := f.do("PUT", call[0], jsonType, call[1], "Authorization", "Bearer ")
		if r.status != 403 || r.body["type"] != problemTypePrefix+"admin-disabled" {
			t.Errorf("PUT %s with no admin token configured = %d %s, want 403 admin-disabled", call[0], r.status, r.raw)
		}
	}
}

func TestStrategies(t *testing.T) {
	f := newFixture(t, adminToken)
	r := f.do("GET", "/strategies", "", "")
	var list []wire.StrategyInfo
	if err := json.Unmarshal([]byte(r.raw), &list); err != nil || len(list) != len(inventory.Names()) {
		t.Fatalf("GET /strategies = %s (%v), want %d strategies", r.raw, err, len(inventory.Names()))
	}
	for _, s := range list {
		wantSafe := s.Name != inventory.None && s.Name != inventory.Local && s.Name != inventory.SetNX
		if s.Safe != wantSafe || s.Description == "" {
			t.Errorf("strategy %s: safe=%v description=%q, want safe=%v and a description", s.Name, s.Safe, s.Description, wantSafe)
		}
	}

	auth := []string{"Authorization", "Bearer " + adminToken}
	if r := f.do("GET", "/strategy", "", ""); r.body["strategy"] != inventory.Atomic {
		t.Errorf("GET /strategy = %s, want atomic", r.raw)
	}
	if r := f.do("PUT", "/strategy", jsonType, `{"strategy":"optimistic"}`, auth...); r.status != 200 {
		t.Fatalf("PUT /strategy optimistic = %d %s", r.status, r.raw)
	}
	// No wait: PUT /strategy answers once every replica follows the new
	// default, this one first.
	f.restock("sku-1", 5)
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`); r.body["strategy"] != inventory.Optimistic {
		t.Errorf("sale after switching the default = %s, want strategy optimistic", r.raw)
	}
	for body, problem := range map[string]string{`{"strategy":"magic"}`: "unknown-strategy", `{}`: "malformed-request", `{"strategy":1}`: "malformed-request"} {
		if r := f.do("PUT", "/strategy", jsonType, body, auth...); r.status != 400 || r.body["type"] != problemTypePrefix+problem {
			t.Errorf("PUT /strategy %s = %d %s, want 400 %s", body, r.status, r.raw, problem)
		}
	}
	if r := f.do("GET", "/strategy", "", ""); r.body["strategy"] != inventory.Optimistic {
		t.Errorf("refused switches changed the default: %s", r.raw)
	}
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	f := newFixture(t, adminToken)
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := f.do("GET", path, "", ""); r.status != 200 || r.body["instance"] != "test-1" {
			t.Errorf("GET %s = %d %s, want 200 naming the instance", path, r.status, r.raw)
		}
	}
	f.restock("sku-1", 1)
	f.do("POST", "/sale?strategy=lua", jsonType, `{"product_id":"sku-1","quantity":1}`, admin...)
	r := f.do("GET", "/metrics", "", "")
	for _, want := range []string{
		`inventory_sales_total{result="ok",strategy="lua"} 1`,
		`inventory_sale_duration_seconds_bucket{result="ok",strategy="lua",le="0.0001"}`,
		`inventory_http_requests_total{code="200",method="POST",route="/sale"} 1`,
		`inventory_lock_breaches_total{strategy="redis"} 0`,
		"inventory_pg_pool_max_conns", "go_goroutines",
	} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
}

func TestReadinessFailsWhenRedisIsDown(t *testing.T) {
	f := newFixture(t, adminToken)
	srv := testenv.RedisServer(t)
	down := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	_ = srv.Stop()
	s := &server{Config: Config{Store: f.store, Redis: down}}
	err := s.ready(context.Background())
	if k := classify(err); k.status != 503 {
		t.Errorf("ready() with Redis down = %v (%d), want a 503 error", err, k.status)
	}
}

func TestClassifyMapsEverySentinel(t *testing.T) {
	for err, want := range map[error]int{
		inventory.ErrNotFound: 404, inventory.ErrSoldOut: 409, inventory.ErrBadProductID: 400, inventory.ErrBadQuantity: 400,
		inventory.ErrLockTimeout: 503, inventory.ErrContention: 503, inventory.ErrLockLost: 503, inventory.ErrUnavailable: 503, inventory.ErrOverloaded: 503,
		inventory.ErrIdempotencyConflict: 422, inventory.ErrUnknownStrategy: 400, context.DeadlineExceeded: 503,
		fmt.Errorf("wrapped: %w", inventory.ErrSoldOut): 409, fmt.Errorf("anything else"): 500,
	} {
		if got := classify(err).status; got != want {
			t.Errorf("classify(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestClassifyCombinedSentinels(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		slug   string
		retry  bool
	}{
		{fmt.Errorf("commit: %w: %w: reply lost", inventory.ErrUnavailable, inventory.ErrOutcomeUnknown), 503, "outcome-unknown", false},
		{fmt.Errorf("%w: %w: and the ledger could not be read", inventory.ErrLockLost, inventory.ErrOutcomeUnknown), 503, "outcome-unknown", false},
		{fmt.Errorf("%w: %w: fencing token 3 is not newer than 9", inventory.ErrLockBreach, inventory.ErrLockLost), 503, "lock-lost", true},
		{fmt.Errorf("%w: the stock changed under the lock: %w", inventory.ErrLockBreach, inventory.ErrSoldOut), 409, "sold-out", false},
		{fmt.Errorf("postgres: commit: %w: connection reset", inventory.ErrUnavailable), 503, "unavailable", true},
	} {
		if k := classify(tc.err); k.status != tc.status || k.slug != tc.slug || k.retry != tc.retry {
			t.Errorf("classify(%v) = %d %s retry=%v, want %d %s retry=%v", tc.err, k.status, k.slug, k.retry, tc.status, tc.slug, tc.retry)
		}
	}
}

// fakeSeller fails every sale with err.
type fakeSeller struct{ err error }

func (s fakeSeller) Sell(context.Context, inventory.Order) (inventory.Sale, error) {
	return inventory.Sale{}, s.err
}

// logLines collects JSON log lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find returns the log line about request id.
func (l *logLines) find(id string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["request_id"] == id {
			return m
		}
	}
	return nil
}

func TestSaleProblemsTellNoInternalsAndAreLoggedAtTheirLevel(t *testing.T) {
	const secret = "dial tcp 10.9.8.7:5432: password=hunter2"
	var logs logLines
	fail := &fakeSeller{}
	f := newFixture(t, adminToken, func(c *Config) {
		c.Sellers[inventory.None] = fail
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	f.restock("sku-1", 5)
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		problem    string
		retryAfter bool
		breach     bool
		level      string
	}{
		{"breach, lock lost", fmt.Errorf("%w: %w: fencing token 3 is not newer than 9: %s", inventory.ErrLockBreach, inventory.ErrLockLost, secret), 503, "lock-lost", true, true, "WARN"},
		{"breach, sold out", fmt.Errorf("%w: the stock changed under the lock: %w: %s", inventory.ErrLockBreach, inventory.ErrSoldOut, secret), 409, "sold-out", false, true, "WARN"},
		{"outcome unknown", fmt.Errorf("commit: %w: %w: reply lost: %s", inventory.ErrUnavailable, inventory.ErrOutcomeUnknown, secret), 503, "outcome-unknown", false, false, "ERROR"},
		{"unavailable", fmt.Errorf("postgres: read: %w: %s", inventory.ErrUnavailable, secret), 503, "unavailable", true, false, "ERROR"},
		{"internal", fmt.Errorf("postgres: %s", secret), 500, "internal", false, false, "ERROR"},
		{"lock timeout", fmt.Errorf("%w: %s", inventory.ErrLockTimeout, secret), 503, "lock-timeout", true, false, "WARN"},
		{"contention", fmt.Errorf("%w: %s", inventory.ErrContention, secret), 503, "contention", true, false, "WARN"},
		{"overloaded", fmt.Errorf("%w: %s", inventory.ErrOverloaded, secret), 503, "overloaded", true, false, "WARN"},
		{"lock lost", fmt.Errorf("%w: %s", inventory.ErrLockLost, secret), 503, "lock-lost", true, false, "WARN"},
		{"canceled", fmt.Errorf("postgres: %s: %w", secret, context.Canceled), 503, "canceled", true, false, "WARN"},
		{"sold out", fmt.Errorf("1 of \"sku-1\" wanted, 0 left (and returning them failed: %s): %w", secret, inventory.ErrSoldOut), 409, "sold-out", false, false, "DEBUG"},
	} {
		fail.err = tc.err
		r := f.do("POST", "/sale?strategy=none", jsonType, `{"product_id":"sku-1","quantity":1}`, admin...)
		if r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: POST /sale = %d %s %s, want %d %s problem+json", tc.name, r.status, r.header.Get("Content-Type"), r.raw, tc.status, tc.problem)
			continue
		}
		if strings.Contains(r.raw, "hunter2") || strings.Contains(r.raw, "10.9.8.7") || r.body["detail"] == "" {
			t.Errorf("%s: answer %s leaks the error's text or has no detail", tc.name, r.raw)
		}
		if got := r.header.Get("Retry-After") != ""; got != tc.retryAfter {
			t.Errorf("%s: Retry-After present = %v, want %v", tc.name, got, tc.retryAfter)
		}
		if got, _ := r.body["lock_breach"].(bool); got != tc.breach {
			t.Errorf("%s: lock_breach = %v in %s, want %v", tc.name, r.body["lock_breach"], r.raw, tc.breach)
		}
		line := logs.find(r.header.Get("X-Request-ID"))
		if line == nil || line["level"] != tc.level || line["problem"] != tc.problem {
			t.Errorf("%s: log line for request %q = %v, want level %s, problem %s", tc.name, r.header.Get("X-Request-ID"), line, tc.level, tc.problem)
			continue
		}
		if tc.breach && (line["strategy"] != inventory.None || line["product_id"] != "sku-1" || line["lock_breach"] != true) {
			t.Errorf("%s: breach log line %v lacks strategy none, product_id sku-1, lock_breach true", tc.name, line)
		}
	}
	if r := f.do("GET", "/metrics", "", ""); !strings.Contains(r.raw, `inventory_lock_breaches_total{strategy="none"} 2`) {
		t.Errorf("GET /metrics lacks inventory_lock_breaches_total{strategy=\"none\"} 2 after two breaches")
	}
	if r := f.do("GET", "/metrics", "", ""); !strings.Contains(r.raw, `inventory_sales_total{result="outcome-unknown",strategy="none"} 1`) {
		t.Errorf("GET /metrics lacks the outcome-unknown sale result")
	}
	if p := f.product("sku-1"); p.Quantity != 5 || p.Sales != 0 {
		t.Errorf("failed sales changed the product: %+v", p)
	}
}

func TestEveryServerErrorHasAFixedDetail(t *testing.T) {
	for _, err := range []error{
		inventory.ErrOutcomeUnknown, inventory.ErrLockTimeout, inventory.ErrContention, inventory.ErrLockLost,
		inventory.ErrUnavailable, context.Canceled, context.DeadlineExceeded, errors.New("x"),
	} {
		if k := classify(err); k.status < 500 || k.detail == "" || k.level < slog.LevelWarn {
			t.Errorf("classify(%v) = %d detail %q level %v, want a 5xx with a fixed detail logged at WARN or above", err, k.status, k.detail, k.level)
		}
	}
}

func TestNamingTheStrategyIsAnAdminCall(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-1", 5)
	before := f.product("sku-1")
	for _, tc := range []struct {
		name   string
		path   string
		header []string
	}{
		{"anonymous", "/sale?strategy=none", nil},
		{"anonymous, unknown strategy", "/sale?strategy=magic", nil},
		{"anonymous, empty strategy", "/sale?strategy=", nil},
		{"wrong token", "/sale?strategy=none", []string{"Authorization", "Bearer nope"}},
		{"token, wrong scheme", "/sale?strategy=none", []string{"Authorization", "Basic " + adminToken}},
	} {
		r := f.do("POST", tc.path, jsonType, `{"product_id":"sku-1","quantity":1}`, tc.header...)
		if r.status != 401 || r.body["type"] != problemTypePrefix+"unauthorized" || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: POST %s = %d %s, want 401 unauthorized problem+json", tc.name, tc.path, r.status, r.raw)
		}
		if r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: POST %s: 401 without WWW-Authenticate", tc.name, tc.path)
		}
	}
	if after := f.product("sku-1"); after != before {
		t.Errorf("refused sales changed the product or its ledger: before %+v, after %+v", before, after)
	}
	if count, units, err := f.store.Ledger(context.Background(), "sku-1"); err != nil || count != 0 || units != 0 {
		t.Errorf("ledger after refused sales = %d rows, %d units, %v; want 0, 0", count, units, err)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`); r.status != 200 || r.body["strategy"] != inventory.Atomic {
		t.Errorf("anonymous POST /sale (fleet default) = %d %s, want 200 with atomic", r.status, r.raw)
	}
}

// TestSaleByProductPathAnswersLikeSale: the answers POST /sale gives that
// POST /products/{id}/sale gives too: admin calls disabled, a body too
// large, a key reused for another order, a failing strategy.
func TestSaleByProductPathAnswersLikeSale(t *testing.T) {
	disabled := newFixture(t, "")
	disabled.restock("sku-1", 5)
	if r := disabled.do("POST", "/products/sku-1/sale?strategy=none", jsonType, `{"quantity":1}`); r.status != 403 || r.body["type"] != problemTypePrefix+"admin-disabled" {
		t.Errorf("POST /products/sku-1/sale?strategy=none with admin disabled = %d %s, want 403 admin-disabled", r.status, r.raw)
	}
	if r := disabled.do("GET", "/debug/pprof/heap", "", ""); r.status != 403 || r.body["type"] != problemTypePrefix+"admin-disabled" {
		t.Errorf("GET /debug/pprof/heap with admin disabled = %d %.200s, want 403 admin-disabled", r.status, r.raw)
	}

	var fail fakeSeller
	f := newFixture(t, adminToken, func(c *Config) { c.Sellers[inventory.None] = &fail })
	f.restock("sku-1", 5)
	if r := f.do("POST", "/products/sku-1/sale", jsonType, `{"quantity":1,"pad":"`+strings.Repeat("x", 5000)+`"}`); r.status != 413 {
		t.Errorf("POST /products/sku-1/sale with a 5 KB body = %d %s, want 413", r.status, r.raw)
	}
	f.do("POST", "/products/sku-1/sale", jsonType, `{"quantity":1}`, "Idempotency-Key", "path-k")
	if r := f.do("POST", "/products/sku-1/sale", jsonType, `{"quantity":2}`, "Idempotency-Key", "path-k"); r.status != 422 {
		t.Errorf("POST /products/sku-1/sale reusing a key for 2 units = %d %s, want 422", r.status, r.raw)
	}
	for _, tc := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("postgres: %w", inventory.ErrUnavailable), 503},
		{errors.New("a bug"), 500},
	} {
		fail.err = tc.err
		if r := f.do("POST", "/products/sku-1/sale?strategy=none", jsonType, `{"quantity":1}`, admin...); r.status != tc.status {
			t.Errorf("POST /products/sku-1/sale when the strategy fails with %v = %d %s, want %d", tc.err, r.status, r.raw, tc.status)
		}
	}
}

func TestNamingTheStrategyWithAdminDisabledIs403(t *testing.T) {
	f := newFixture(t, "")
	f.restock("sku-1", 5)
	for _, header := range [][]string{nil, {"Authorization", "Bearer "}, {"Authorization", "Bearer " + adminToken}} {
		r := f.do("POST", "/sale?strategy=none", jsonType, `{"product_id":"sku-1","quantity":1}`, header...)
		if r.status != 403 || r.body["type"] != problemTypePrefix+"admin-disabled" {
			t.Errorf("POST /sale?strategy=none with admin disabled, header %q = %d %s, want 403 admin-disabled", header, r.status, r.raw)
		}
	}
	if p := f.product("sku-1"); p.Quantity != 5 || p.Sales != 0 {
		t.Errorf("refused sales changed the product: %+v", p)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`); r.status != 200 {
		t.Errorf("anonymous POST /sale with admin disabled = %d %s, want 200 (the fleet default needs no token)", r.status, r.raw)
	}
}

func TestRounds(t *testing.T) {
	f := newFixture(t, adminToken)
	f.restock("sku-r", 5)
	first := f.do("POST", "/sale", jsonType, `{"product_id":"sku-r","quantity":2}`)
	f.restock("sku-r", 10)
	second := f.do("POST", "/sale", jsonType, `{"product_id":"sku-r","quantity":1}`)
	if first.body["round"] != float64(1) || second.body["round"] != float64(2) {
		t.Fatalf("sales before and after a restock answered round %v and %v, want 1 and 2 (%s, %s)", first.body["round"], second.body["round"], first.raw, second.raw)
	}
	for path, want := range map[string]map[string]any{
		"/products/sku-r/rounds/1": {"product_id": "sku-r", "round": float64(1), "initial": float64(5), "sold": float64(2), "sales": float64(1), "current": false},
		"/products/sku-r/rounds/2": {"product_id": "sku-r", "round": float64(2), "initial": float64(10), "sold": float64(1), "sales": float64(1), "current": true},
	} {
		r := f.do("GET", path, "", "")
		if r.status != 200 || len(r.body) != len(want) {
			t.Errorf("GET %s = %d %s, want 200 with exactly %v", path, r.status, r.raw, want)
			continue
		}
		for k, v := range want {
			if r.body[k] != v {
				t.Errorf("GET %s: %s = %v, want %v (%s)", path, k, r.body[k], v, r.raw)
			}
		}
	}
	for _, tc := range []struct {
		path    string
		status  int
		problem string
	}{
		{"/products/sku-r/rounds/3", 404, "product-not-found"},
		{"/products/sku-404/rounds/1", 404, "product-not-found"},
		{"/products/sku%20x/rounds/1", 400, "bad-product-id"},
		{"/products/sku-r/rounds/0", 400, "malformed-request"},
		{"/products/sku-r/rounds/-1", 400, "malformed-request"},
		{"/products/sku-r/rounds/1.5", 400, "malformed-request"},
		{"/products/sku-r/rounds/one", 400, "malformed-request"},
		{"/products/sku-r/rounds/2147483648", 400, "malformed-request"},
		{"/products/sku-r/rounds/99999999999999999999", 400, "malformed-request"},
	} {
		if r := f.do("GET", tc.path, "", ""); r.status != tc.status || r.body["type"] != problemTypePrefix+tc.problem {
			t.Errorf("GET %s = %d %s, want %d %s", tc.path, r.status, r.raw, tc.status, tc.problem)
		}
	}
}

// TestProfilesAreForTheAdminOnly: Go's profiles are served under
// /debug/pprof/ with the admin token, and refused without it.
func TestProfilesAreForTheAdminOnly(t *testing.T) {
	f := newFixture(t, adminToken)
	if r := f.do("GET", "/debug/pprof/goroutine?debug=1", "", ""); r.status != 401 || r.body["type"] != problemTypePrefix+"unauthorized" {
		t.Errorf("GET /debug/pprof/goroutine without the token = %d %.200s, want 401 unauthorized", r.status, r.raw)
	}
	r := f.do("GET", "/debug/pprof/goroutine?debug=1", "", "", admin...)
	if r.status != 200 || !strings.Contains(r.raw, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine with the token = %d %.200s, want the goroutine profile", r.status, r.raw)
	}
	if r := f.do("GET", "/debug/pprof/nonsense", "", "", admin...); r.status != 404 || r.body["type"] != problemTypePrefix+"not-found" {
		t.Errorf("GET /debug/pprof/nonsense with the token = %d %.200s, want 404 not-found", r.status, r.raw)
	}
}

// TestStrategyUnavailable: the fixture runs without the lock services of
// the strategies that need one (inventory.Info.Needs). They are listed as
// unavailable, naming the setting, and a sale with one, or making one the
// fleet default, is a 503 strategy-unavailable that names the setting,
// without Retry-After, and changes nothing.
func TestStrategyUnavailable(t *testing.T) {
	f := newFixture(t, adminToken)
	r := f.do("GET", "/strategies", "", "")
	var list []wire.StrategyInfo
	if err := json.Unmarshal([]byte(r.raw), &list); err != nil {
		t.Fatal(err)
	}
	var needy []wire.StrategyInfo
	for _, s := range list {
		info, _ := inventory.Lookup(s.Name)
		if s.Available == (info.Needs != "") || s.Needs != info.Needs {
			t.Errorf("strategy %s: available=%v needs=%q; want available exactly when it needs nothing here (needs %q)", s.Name, s.Available, s.Needs, info.Needs)
		}
		if info.Needs != "" {
			needy = append(needy, s)
		}
	}
	if len(needy) == 0 {
		t.Fatal("no strategy needs a lock service of its own; design.md's redlock, etcd and zookeeper do")
	}
	auth := []string{"Authorization", "Bearer " + adminToken}
	f.restock("sku-1", 5)
	for _, s := range needy {
		for _, r := range []response{
			f.do("POST", "/sale?strategy="+s.Name, jsonType, `{"product_id":"sku-1","quantity":1}`, auth...),
			f.do("PUT", "/strategy", jsonType, `{"strategy":"`+s.Name+`"}`, auth...),
		} {
			detail, _ := r.body["detail"].(string)
			if r.status != 503 || r.body["type"] != problemTypePrefix+"strategy-unavailable" || !strings.Contains(detail, s.Needs) || r.header.Get("Retry-After") != "" {
				t.Errorf("%s: %d %s (Retry-After %q); want 503 strategy-unavailable naming %s, no Retry-After", s.Name, r.status, r.raw, r.header.Get("Retry-After"), s.Needs)
			}
		}
	}
	if p := f.product("sku-1"); p.Quantity != 5 {
		t.Errorf("stock after refused sales = %d, want 5", p.Quantity)
	}
	if r := f.do("GET", "/strategy", "", ""); r.body["strategy"] != inventory.Atomic {
		t.Errorf("the default after refused switches = %s, want atomic", r.raw)
	}
}
