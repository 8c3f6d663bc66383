package metrics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pinger checks that one backend answers.
type Pinger func(ctx context.Context) error

// BackendOptions configure Backends; the zero value works.
type BackendOptions struct {
	// Interval is how often each backend is pinged; default 1s.
	Interval time.Duration
	// Timeout bounds one ping; default 1s.
	Timeout time.Duration
	// MaxAge is how old a backend's last answer may grow before Ready
	// calls it down, even if no ping has failed (the loop is stuck, or the
	// process was paused); default 3 × Interval.
	MaxAge time.Duration
}

func (o BackendOptions) withDefaults() BackendOptions {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 3 * o.Interval
	}
	return o
}

// Backends pings each backend from one loop (Run) and keeps what it
// learnt, so that readiness (Ready) and scrapes (Collect) answer from
// memory: however many ask, and whoever they are, they cost the backends
// nothing, and none of their round trips takes a connection a sale needs.
// The pings go wherever their Pinger sends them; give Postgres a pool of
// its own.
type Backends struct {
	opts    BackendOptions
	names   []string // sorted
	pingers map[string]Pinger
	now     func() time.Time // time.Now; a test's clock

	mu   sync.Mutex
	last map[string]pingResult

	seconds *prometheus.Desc
	up      *prometheus.Desc
	age     *prometheus.Desc
}

// pingResult is one backend's last ping, and its last good one.
type pingResult struct {
	checked bool          // pinged at least once
	err     error         // the last ping's error; nil: it answered
	took    time.Duration // the last good ping's round trip
	okAt    time.Time     // when the last good ping started; zero: none yet
}

// NewBackends returns the backends that pingers ping (by name, e.g.
// "postgres", "redis"); none is checked, so none ready, until the first
// Check. Register it on a prometheus.Registerer to export
// inventory_backend_up{backend}, inventory_backend_ping_seconds{backend} and
// inventory_backend_check_age_seconds{backend}.
func NewBackends(pingers map[string]Pinger, opts BackendOptions) *Backends {
	b := &Backends{opts: opts.withDefaults(), pingers: pingers, now: time.Now, last: map[string]pingResult{},
		seconds: prometheus.NewDesc("inventory_backend_ping_seconds",
			"Round trip of the last ping that the backend answered (pinged in the background every second, not at scrape time).", []string{"backend"}, nil),
		up: prometheus.NewDesc("inventory_backend_up",
			"1 when the backend answered its last background ping, recently enough for readiness; else 0.", []string{"backend"}, nil),
		age: prometheus.NewDesc("inventory_backend_check_age_seconds",
			"Seconds since the backend last answered a background ping (absent before its first answer).", []string{"backend"}, nil),
	}
	for name := range pingers {
		b.names = append(b.names, name)
	}
	sort.Strings(b.names)
	return b
}

// Run pings every backend at once, then every Interval, until ctx ends.
// Its caller owns it: cancel ctx and wait for Run to return.
func (b *Backends) Run(ctx context.Context) {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		b.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check pings every backend once, one after the other, and records what
// each answered.
func (b *Backends) Check(ctx context.Context) {
	for _, name := range b.names {
		pctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
		start := b.now()
		err := b.pingers[name](pctx)
		took := b.now().Sub(start)
		cancel()
		if ctx.Err() != nil {
			return // stopping: a ping cut short says nothing about the backend
		}
		b.mu.Lock()
		r := b.last[name]
		r.checked, r.err = true, err
		if err == nil {
			r.took, r.okAt = took, start
		}
		b.last[name] = r
		b.mu.Unlock()
	}
}

// ErrBackendDown is what Ready wraps when a backend's last ping failed,
// is too old, or has not been made yet.
var ErrBackendDown = errors.New("backend down")

// Ready returns nil when every backend answered its last ping and that
// answer is at most MaxAge old; else an error naming each backend that is
// not, wrapping ErrBackendDown. It makes no round trip.
func (b *Backends) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	var errs []error
	for _, name := range b.names {
		if err := b.down(b.last[name], now); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrBackendDown, name, err))
		}
	}
	return errors.Join(errs...)
}

// down says why r is not a healthy backend at now; nil when it is.
func (b *Backends) down(r pingResult, now time.Time) error {
	switch {
	case !r.checked:
		return errors.New("not checked yet")
	case r.err != nil:
		return r.err
	case now.Sub(r.okAt) > b.opts.MaxAge:
		return fmt.Errorf("last answered %s ago, more than %s", now.Sub(r.okAt).Round(time.Millisecond), b.opts.MaxAge)
	}
	return nil
}

var _ prometheus.Collector = (*Backends)(nil)

// Describe implements prometheus.Collector.
func (b *Backends) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.seconds
	ch <- b.up
	ch <- b.age
}

// Collect implements prometheus.Collector from the last pings: a scrape
// pings nothing.
func (b *Backends) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for _, name := range b.names {
		r := b.last[name]
		up := 1.0
		if b.down(r, now) != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(b.up, prometheus.GaugeValue, up, name)
		if up == 1 { // a backend that is down has no round trip to show
			ch <- prometheus.MustNewConstMetric(b.seconds, prometheus.GaugeValue, r.took.Seconds(), name)
		}
		if !r.okAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(b.age, prometheus.GaugeValue, now.Sub(r.okAt).Seconds(), name)
		}
	}
}
