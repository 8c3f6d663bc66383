package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pingTimeout bounds one backend ping during a scrape.
const pingTimeout = time.Second

// Pinger checks that one backend answers.
type Pinger func(ctx context.Context) error

// backendPings measures, at every scrape, how long each backend takes to
// answer a ping: the round trip a sale pays per statement or command.
type backendPings struct {
	pingers map[string]Pinger
	seconds *prometheus.Desc
	up      *prometheus.Desc
}

// RegisterBackendPings exports inventory_backend_ping_seconds{backend} and
// inventory_backend_up{backend} on reg, measured by pinging each backend
// (e.g. "postgres", "redis") when Prometheus scrapes.
func RegisterBackendPings(reg prometheus.Registerer, pingers map[string]Pinger) {
	reg.MustRegister(&backendPings{
		pingers: pingers,
		seconds: prometheus.NewDesc("inventory_backend_ping_seconds",
			"Round trip of a ping to the backend, measured at scrape time.", []string{"backend"}, nil),
		up: prometheus.NewDesc("inventory_backend_up",
			"1 when the backend answered its ping at scrape time, else 0.", []string{"backend"}, nil),
	})
}

func (b *backendPings) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.seconds
	ch <- b.up
}

func (b *backendPings) Collect(ch chan<- prometheus.Metric) {
	for name, ping := range b.pingers {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		start := time.Now()
		err := ping(ctx)
		took := time.Since(start)
		cancel()
		up := 1.0
		if err != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(b.up, prometheus.GaugeValue, up, name)
		if err == nil {
			ch <- prometheus.MustNewConstMetric(b.seconds, prometheus.GaugeValue, took.Seconds(), name)
		}
	}
}
