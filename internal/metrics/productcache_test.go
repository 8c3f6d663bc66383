package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"inventory/internal/productcache"
)

func TestProductReadsReachTheRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProductReads(reg)
	p.Answered(productcache.SourceCache)
	p.Answered(productcache.SourceCache)
	p.Answered(productcache.SourcePostgres)
	p.FellBack(productcache.FallbackRedis)
	p.Locked(productcache.LockHeld)
	p.Waited(3*time.Millisecond, true)
	want := `
# HELP inventory_product_reads_total Answers to product reads by where they came from: cache (the shared entry), stale (the entry while another reader refreshed it), joined (a lookup another read of this replica made), postgres (a Postgres read of its own).
# TYPE inventory_product_reads_total counter
inventory_product_reads_total{source="cache"} 2
inventory_product_reads_total{source="joined"} 0
inventory_product_reads_total{source="postgres"} 1
inventory_product_reads_total{source="stale"} 0
# HELP inventory_product_cache_fallbacks_total Postgres reads the product cache could not spare, by reason: redis (Redis failed), wait (another reader's refresh did not come in time).
# TYPE inventory_product_cache_fallbacks_total counter
inventory_product_cache_fallbacks_total{reason="redis"} 1
inventory_product_cache_fallbacks_total{reason="wait"} 0
# HELP inventory_product_cache_refresh_locks_total Tries of a product's refresh lock, by result: acquired, held (another reader refreshes), error.
# TYPE inventory_product_cache_refresh_locks_total counter
inventory_product_cache_refresh_locks_total{result="acquired"} 0
inventory_product_cache_refresh_locks_total{result="error"} 0
inventory_product_cache_refresh_locks_total{result="held"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inventory_product_reads_total",
		"inventory_product_cache_fallbacks_total", "inventory_product_cache_refresh_locks_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(p.waits); n != 2 {
		t.Errorf("wait series = %d, want 2 (filled and timeout, from the start)", n)
	}
}
