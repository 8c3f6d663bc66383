package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inventory/internal/productcache"
)

// ProductReads is the product cache's metrics (productcache.Observer): the
// answers to GET /products/{id} by where they came from, the Postgres reads
// the cache could not spare, and the waits for another replica's refresh.
type ProductReads struct {
	reads     map[productcache.Source]prometheus.Counter
	fallbacks *prometheus.CounterVec
	waits     *prometheus.HistogramVec
	locks     *prometheus.CounterVec
}

// NewProductReads registers the product cache's collectors on reg, every
// series at 0 from the start (so that rate() sees the first event).
func NewProductReads(reg prometheus.Registerer) *ProductReads {
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inventory_product_reads_total",
		Help: "Answers to product reads by where they came from: cache (the shared entry), stale (the entry while another " +
			"reader refreshed it), joined (a lookup another read of this replica made), postgres (a Postgres read of its own).",
	}, []string{"source"})
	p := &ProductReads{
		reads: map[productcache.Source]prometheus.Counter{},
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_product_cache_fallbacks_total",
			Help: "Postgres reads the product cache could not spare, by reason: redis (Redis failed), wait (another reader's refresh did not come in time).",
		}, []string{"reason"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inventory_product_cache_wait_seconds",
			Help:    "Waits of a product read that missed for another reader's refresh, by result: filled (the entry came) or timeout (the wait ran out, or Redis failed).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		locks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_product_cache_refresh_locks_total",
			Help: "Tries of a product's refresh lock, by result: acquired, held (another reader refreshes), error.",
		}, []string{"result"}),
	}
	for _, s := range []productcache.Source{productcache.SourceCache, productcache.SourceStale, productcache.SourceJoined, productcache.SourcePostgres} {
		p.reads[s] = reads.WithLabelValues(string(s))
	}
	for _, r := range []string{productcache.FallbackRedis, productcache.FallbackWait} {
		p.fallbacks.WithLabelValues(r)
	}
	for _, r := range []string{"filled", "timeout"} {
		p.waits.WithLabelValues(r)
	}
	for _, r := range []string{productcache.LockAcquired, productcache.LockHeld, productcache.LockError} {
		p.locks.WithLabelValues(r)
	}
	reg.MustRegister(reads, p.fallbacks, p.waits, p.locks)
	return p
}

// Answered implements productcache.Observer.
func (p *ProductReads) Answered(source productcache.Source) {
	if c := p.reads[source]; c != nil {
		c.Inc()
	}
}

// FellBack implements productcache.Observer.
func (p *ProductReads) FellBack(reason string) { p.fallbacks.WithLabelValues(reason).Inc() }

// Waited implements productcache.Observer.
func (p *ProductReads) Waited(d time.Duration, filled bool) {
	result := "timeout"
	if filled {
		result = "filled"
	}
	p.waits.WithLabelValues(result).Observe(d.Seconds())
}

// Locked implements productcache.Observer.
func (p *ProductReads) Locked(result string) { p.locks.WithLabelValues(result).Inc() }

var _ productcache.Observer = (*ProductReads)(nil)
