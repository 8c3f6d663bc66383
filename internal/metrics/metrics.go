// Package metrics defines the service's Prometheus metrics: sales, the
// steps of orders' lives, lock events, lock breaches, optimistic
// conflicts, broken invariants and open circuits, HTTP traffic and
// connection-pool state.
package metrics

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/watchdog"
)

// latencyBuckets resolve sub-millisecond Redis paths as well as multi-second
// lock waits: 50µs to 10s.
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Metrics holds every collector; build it once per process with New.
type Metrics struct {
	sales        *prometheus.CounterVec
	saleSeconds  *prometheus.HistogramVec
	breaches     *prometheus.CounterVec
	conflicts    prometheus.Counter
	httpRequests *prometheus.CounterVec
	httpSeconds  *prometheus.HistogramVec
	lockAcquire  *prometheus.HistogramVec
	lockTrips    prometheus.Histogram
	lockRenewals *prometheus.CounterVec
	lockLost     *prometheus.CounterVec
	lockHeld     prometheus.Histogram
	lockReleases *prometheus.CounterVec
	violations   *prometheus.CounterVec
	circuitOpen  *prometheus.GaugeVec
	orderSteps   *prometheus.CounterVec
	expired      prometheus.Counter
	held         prometheus.Gauge
	overdue      prometheus.Gauge

	// The per-request series, by their labels: a label lookup in a vector
	// hashes and locks, and every request did two.
	saleSeries sync.Map // saleLabels → series
	httpSeries sync.Map // httpLabels → series
}

// series is one counter and its latency histogram.
type series struct {
	total   prometheus.Counter
	seconds prometheus.Observer
}

type saleLabels struct{ strategy, result string }

type httpLabels struct {
	route, method string
	code          int
}

// New registers the service's collectors, and the Go and process collectors,
// on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sales: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_sales_total", Help: "Sale attempts by strategy and result.",
		}, []string{"strategy", "result"}),
		saleSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inventory_sale_duration_seconds", Help: "Time to sell, by strategy and result.", Buckets: latencyBuckets,
		}, []string{"strategy", "result"}),
		breaches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_lock_breaches_total",
			Help: "Lock holders' writes that Postgres refused (stale fence or guard) because the lock had broken, by strategy.",
		}, []string{"strategy"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inventory_optimistic_conflicts_total", Help: "Optimistic compare-and-set attempts that lost and were retried.",
		}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inventory_http_request_duration_seconds", Help: "HTTP request latency by route.", Buckets: latencyBuckets,
		}, []string{"route", "method"}),
		lockAcquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inventory_lock_acquire_seconds", Help: "Time spent acquiring a Redis lock, by result.", Buckets: latencyBuckets,
		}, []string{"result"}),
		lockTrips: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inventory_lock_acquire_round_trips", Help: "Redis round trips per lock acquisition.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		lockRenewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_lock_renewals_total", Help: "Watchdog renewals by result.",
		}, []string{"result"}),
		lockLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_lock_lost_total", Help: "Leases lost while held, by reason.",
		}, []string{"reason"}),
		lockHeld: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inventory_lock_held_seconds", Help: "How long locks were held.", Buckets: latencyBuckets,
		}),
		lockReleases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_lock_releases_total", Help: "Lock releases by result.",
		}, []string{"result"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_invariant_violations_total",
			Help: "Broken stock invariants the watchdog found (each new piece of evidence once), by product and kind.",
		}, []string{"product", "kind"}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inventory_circuit_open", Help: "1 for each product whose sales this replica refuses because its circuit is open.",
		}, []string{"product"}),
		orderSteps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_order_steps_total",
			Help: "Steps of orders' lives asked (pay, cancel, refund, ship) by step and outcome: ok, or the problem type (order-state, order-expired, lock-timeout, ...).",
		}, []string{"step", "outcome"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inventory_orders_expired_total",
			Help: "Held orders this replica's expiry sweeps expired, their units given back.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inventory_orders_held",
			Help: "Orders held (units out of the stock, not yet paid) in the whole fleet, as the last expiry sweep this replica ran read them.",
		}),
		overdue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inventory_orders_overdue_seconds",
			Help: "How long past its deadline the most overdue held order was after the last expiry sweep this replica ran: the sweep's lag.",
		}),
	}
	reg.MustRegister(
		m.sales, m.saleSeconds, m.breaches, m.conflicts, m.httpRequests, m.httpSeconds,
		m.lockAcquire, m.lockTrips, m.lockRenewals, m.lockLost, m.lockHeld, m.lockReleases,
		m.violations, m.circuitOpen, m.orderSteps, m.expired, m.held, m.overdue,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Sale records one sale attempt.
func (m *Metrics) Sale(strategy, result string, d time.Duration) {
	labels := saleLabels{strategy, result}
	s, ok := m.saleSeries.Load(labels)
	if !ok {
		s, _ = m.saleSeries.LoadOrStore(labels, series{
			total:   m.sales.WithLabelValues(strategy, result),
			seconds: m.saleSeconds.WithLabelValues(strategy, result),
		})
	}
	s.(series).observe(d)
}

func (s series) observe(d time.Duration) {
	s.total.Inc()
	s.seconds.Observe(d.Seconds())
}

// LockBreach counts one write that Postgres refused because strategy's lock
// had broken.
func (m *Metrics) LockBreach(strategy string) { m.breaches.WithLabelValues(strategy).Inc() }

// Strategies makes the per-strategy counters of rare events (lock breaches)
// export 0 for each of strategies before their first event, so that rate()
// and increase() see that first one.
func (m *Metrics) Strategies(strategies ...string) {
	for _, s := range strategies {
		m.breaches.WithLabelValues(s)
	}
}

// Violated counts one broken invariant the watchdog found (watchdog.Observer).
func (m *Metrics) Violated(v watchdog.Violation) {
	m.violations.WithLabelValues(v.Product, v.Kind).Inc()
}

// CircuitOpen sets the open circuits to products (watchdog.Observer).
func (m *Metrics) CircuitOpen(products []string) {
	m.circuitOpen.Reset()
	for _, p := range products {
		m.circuitOpen.WithLabelValues(p).Set(1)
	}
}

// OrderStep counts one step of an order's life asked through the API:
// step is pay, cancel, refund or ship, outcome "ok" or the answer's
// problem type (order-state, order-expired, lock-timeout, …).
func (m *Metrics) OrderStep(step, outcome string) { m.orderSteps.WithLabelValues(step, outcome).Inc() }

// OrdersSwept records one expiry sweep: the orders it expired, and the
// held orders and the most overdue one's lateness it read after it.
func (m *Metrics) OrdersSwept(expired int, held int64, overdue time.Duration) {
	m.expired.Add(float64(expired))
	m.held.Set(float64(held))
	m.overdue.Set(overdue.Seconds())
}

// OptimisticConflict counts one lost compare-and-set.
func (m *Metrics) OptimisticConflict() { m.conflicts.Inc() }

// HTTPRequest records one served request; route is the chi route pattern.
func (m *Metrics) HTTPRequest(route, method string, code int, d time.Duration) {
	labels := httpLabels{route, httpMethod(method), code}
	s, ok := m.httpSeries.Load(labels)
	if !ok {
		s, _ = m.httpSeries.LoadOrStore(labels, series{
			total:   m.httpRequests.WithLabelValues(labels.route, labels.method, httpCode(code)),
			seconds: m.httpSeconds.WithLabelValues(labels.route, labels.method),
		})
	}
	s.(series).observe(d)
}

// httpMethod is method as a label value: one of the methods HTTP defines,
// else "other" (a client may send any token, and each would be a series).
func httpMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

// Acquired implements lock.Observer.
func (m *Metrics) Acquired(_ string, err error, wait time.Duration, roundTrips int) {
	m.lockAcquire.WithLabelValues(lockResult(err)).Observe(wait.Seconds())
	m.lockTrips.Observe(float64(roundTrips))
}

// Renewed implements lock.Observer.
func (m *Metrics) Renewed(_ string, err error) { m.lockRenewals.WithLabelValues(lockResult(err)).Inc() }

// Lost implements lock.Observer.
func (m *Metrics) Lost(_ string, reason error) { m.lockLost.WithLabelValues(lockResult(reason)).Inc() }

// Released implements lock.Observer.
func (m *Metrics) Released(_ string, held time.Duration, err error) {
	m.lockHeld.Observe(held.Seconds())
	m.lockReleases.WithLabelValues(lockResult(err)).Inc()
}

var _ lock.Observer = (*Metrics)(nil)

// lockResult turns a lock error into a small, fixed set of label values.
func lockResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, lock.ErrNotAcquired):
		return "not_acquired"
	case errors.Is(err, lock.ErrTimeout):
		return "timeout"
	case errors.Is(err, lock.ErrMaxHold):
		return "max_hold"
	case errors.Is(err, lock.ErrLost):
		return "lost"
	case errors.Is(err, lock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, lock.ErrReleaseUnknown):
		return "unknown"
	default:
		return "error"
	}
}

func httpCode(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return string(rune('0'+code/100)) + string(rune('0'+code/10%10)) + string(rune('0'+code%10))
}

// RegisterPools exports connection-pool state of Postgres and Redis on reg.
func RegisterPools(reg prometheus.Registerer, pool *pgxpool.Pool, rdb redis.UniversalClient) {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(
		gauge("inventory_pg_pool_acquired_conns", "Postgres connections in use.", func() float64 { return float64(pool.Stat().AcquiredConns()) }),
		gauge("inventory_pg_pool_idle_conns", "Idle Postgres connections.", func() float64 { return float64(pool.Stat().IdleConns()) }),
		gauge("inventory_pg_pool_max_conns", "Postgres pool size.", func() float64 { return float64(pool.Stat().MaxConns()) }),
		counter("inventory_pg_pool_empty_acquires_total", "Acquires that had to wait for a Postgres connection.", func() float64 { return float64(pool.Stat().EmptyAcquireCount()) }),
		counter("inventory_pg_pool_acquire_wait_seconds_total", "Time spent waiting for a Postgres connection.", func() float64 { return pool.Stat().EmptyAcquireWaitTime().Seconds() }),
		gauge("inventory_redis_pool_total_conns", "Redis connections open.", func() float64 { return float64(rdb.PoolStats().TotalConns) }),
		gauge("inventory_redis_pool_idle_conns", "Idle Redis connections.", func() float64 { return float64(rdb.PoolStats().IdleConns) }),
		counter("inventory_redis_pool_timeouts_total", "Waits for a Redis connection that timed out.", func() float64 { return float64(rdb.PoolStats().Timeouts) }),
	)
}
