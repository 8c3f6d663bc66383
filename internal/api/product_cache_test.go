package api

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/metrics"
	"inventory/internal/productcache"
	"inventory/internal/testenv"
)

// withProductCache gives the server a product cache in lock mode with
// ttl, on rdb (nil: the fixture's Redis), its metrics on the server's
// registry; *into, when not nil, gets the whole Config, to start a second
// replica on the same backends.
func withProductCache(t *testing.T, rdb redis.UniversalClient, ttl time.Duration, into *Config) func(*Config) {
	return func(cfg *Config) {
		if rdb == nil {
			rdb = cfg.Redis
		}
		cfg.ProductCache = newProductCache(t, rdb, cfg, ttl, metrics.NewProductReads(cfg.Gatherer.(prometheus.Registerer)))
		if into != nil {
			*into = *cfg
		}
	}
}

func newProductCache(t *testing.T, rdb redis.UniversalClient, cfg *Config, ttl time.Duration, obs productcache.Observer) *productcache.Cache {
	t.Helper()
	m := redislock.NewMutex(rdb, redislock.Options{Options: lock.Options{TTL: ttl}})
	t.Cleanup(m.Close)
	c, err := productcache.New(rdb, cfg.Store.Product, productcache.Options{TTL: ttl, Locker: m, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// productRead is GET /products/{id}: its status, quantity, round and Age.
func (f *fixture) productRead(id string, header ...string) (status int, quantity, round float64, age string) {
	f.t.Helper()
	r := f.do("GET", "/products/"+id, "", "", header...)
	if r.status == 200 && len(r.header.Values("Age")) != 1 {
		f.t.Errorf("GET /products/%s %v: Age headers %q, want one", id, header, r.header.Values("Age"))
	}
	quantity, _ = r.body["quantity"].(float64)
	round, _ = r.body["round"].(float64)
	return r.status, quantity, round, r.header.Get("Age")
}

// metric is the value of one series on f's /metrics, -1 when absent.
func (f *fixture) metric(series string) float64 {
	f.t.Helper()
	r := f.do("GET", "/metrics", "", "")
	for l := range strings.SplitSeq(r.raw, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				f.t.Fatalf("%s: %v", l, err)
			}
			return n
		}
	}
	return -1
}

func TestAnonymousProductReadsAreCachedAndTheOthersExact(t *testing.T) {
	f := newFixture(t, adminToken, withProductCache(t, nil, productcache.MaxTTL, nil))
	f.restock("sku-1", 5)
	if status, q, round, age := f.productRead("sku-1"); status != 200 || q != 5 || round != 1 || age != "0" {
		t.Fatalf("GET = %d, %v units, round %v, Age %q; want 200, 5, 1, 0", status, q, round, age)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`); r.status != 200 {
		t.Fatalf("POST /sale = %d %s", r.status, r.raw)
	}
	// The sale's answer was exact; the crowd's read is the cached one.
	if status, q, _, _ := f.productRead("sku-1"); status != 200 || q != 5 {
		t.Errorf("anonymous GET after a sale = %d, %v units; want 5, the cached read (10 s bound)", status, q)
	}
	for _, header := range [][]string{admin, {"Cache-Control", "no-cache"}, {"Cache-Control", "max-age=0"}, {"Cache-Control", "public, No-Cache"}} {
		if status, q, _, age := f.productRead("sku-1", header...); status != 200 || q != 4 || age != "0" {
			t.Errorf("GET with %v = %d, %v units, Age %q; want 200, 4 (Postgres's), Age 0", header, status, q, age)
		}
	}
	// A wrong token is an anonymous read, not a 401: reading needs none.
	if status, q, _, _ := f.productRead("sku-1", "Authorization", "Bearer wrong"); status != 200 || q != 5 {
		t.Errorf("GET with a wrong token = %d, %v units; want 200 and the cached 5", status, q)
	}
	for series, want := range map[string]float64{
		`inventory_product_reads_total{source="cache"}`:    2,
		`inventory_product_reads_total{source="postgres"}`: 5,
	} {
		if got := f.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

func TestARestockShowsItsRoundAtOnceOnEveryReplica(t *testing.T) {
	var cfg Config
	f := newFixture(t, adminToken, withProductCache(t, nil, productcache.MaxTTL, &cfg))
	// A second replica on the same Postgres and Redis, with a cache (and
	// a Redis client) of its own.
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	cfg.Instance, cfg.Redis = "test-2", rdb
	cfg.ProductCache = newProductCache(t, rdb, &cfg, productcache.MaxTTL, nil)
	h, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(specChecker(t).Handler(t, h))
	t.Cleanup(srv.Close)
	other := &fixture{t: t, url: srv.URL}

	f.restock("sku-1", 5)
	for _, r := range []*fixture{f, other} {
		if status, q, round, _ := r.productRead("sku-1"); status != 200 || q != 5 || round != 1 {
			t.Fatalf("GET = %d, %v units, round %v; want 5 units of round 1", status, q, round)
		}
	}
	if r := f.do("PUT", "/products/sku-1", jsonType, `{"quantity":9}`, admin...); r.status != 200 {
		t.Fatalf("PUT /products/sku-1 = %d %s", r.status, r.raw)
	}
	for _, r := range []*fixture{other, f} {
		if status, q, round, _ := r.productRead("sku-1"); status != 200 || q != 9 || round != 2 {
			t.Errorf("anonymous GET after the restock = %d, %v units, round %v; want 9 units of round 2 at once", status, q, round)
		}
	}
}

func TestWithTheCachesRedisStoppedProductReadsAnswerFromPostgres(t *testing.T) {
	srv := testenv.RedisServer(t)
	opts, err := redis.ParseURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFixture(t, adminToken, withProductCache(t, rdb, productcache.MaxTTL, nil))
	f.restock("sku-1", 5)
	if status, q, _, _ := f.productRead("sku-1"); status != 200 || q != 5 {
		t.Fatalf("GET = %d, %v units", status, q)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if r := f.do("POST", "/sale", jsonType, `{"product_id":"sku-1","quantity":1}`); r.status != 200 {
		t.Fatalf("POST /sale = %d %s", r.status, r.raw)
	}
	if status, q, _, _ := f.productRead("sku-1"); status != 200 || q != 4 {
		t.Errorf("GET with the cache's Redis stopped = %d, %v units; want 200 and 4 from Postgres", status, q)
	}
	// A restock cannot drop the entry: it still answers its commit.
	if r := f.do("PUT", "/products/sku-1", jsonType, `{"quantity":9}`, admin...); r.status != 200 {
		t.Errorf("PUT /products/sku-1 with the cache's Redis stopped = %d %s, want 200", r.status, r.raw)
	}
	if status, q, _, _ := f.productRead("sku-1"); status != 200 || q != 9 {
		t.Errorf("GET after the restock = %d, %v units; want 200 and 9", status, q)
	}
	if n := f.metric(`inventory_product_cache_fallbacks_total{reason="redis"}`); n != 2 {
		t.Errorf("Redis fallbacks = %v, want 2", n)
	}
}

func TestAgeCountsTheCachedReadsSeconds(t *testing.T) {
	const ttl = productcache.MaxTTL
	f := newFixture(t, adminToken, withProductCache(t, nil, ttl, nil))
	f.restock("sku-1", 5)
	if _, _, _, age := f.productRead("sku-1"); age != "0" {
		t.Fatalf("Age of a read from Postgres = %q, want 0", age)
	}
	testenv.WaitFor(t, "the entry to be more than a second old", 10*time.Second, func() bool {
		pttl, err := f.rdb.PTTL(context.Background(), "product:{sku-1}").Result()
		return err == nil && pttl > 0 && ttl-pttl > 1100*time.Millisecond
	})
	_, _, _, age := f.productRead("sku-1")
	if n, err := strconv.Atoi(age); err != nil || n < 1 || n >= int(ttl/time.Second) {
		t.Errorf("Age of an entry more than a second old = %q, want 1 to %d", age, int(ttl/time.Second)-1)
	}
}
