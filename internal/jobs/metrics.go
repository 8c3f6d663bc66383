package jobs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Runners' Prometheus collectors, one set per process
// for every job (the task label names the job). The label is task, not
// job: Prometheus gives every scraped series a job label of its own (the
// scrape job), and would rename ours.
type Metrics struct {
	runs      *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	lag       *prometheus.HistogramVec
	runner    *prometheus.GaugeVec
	takeovers *prometheus.CounterVec
}

// lagBuckets resolve a timer's late wake-up (a millisecond) as well as a
// takeover's (the lock's TTL, 30s by default): 1ms to 60s.
var lagBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// runBuckets resolve a run that finds nothing to do (a query, ~1ms) as
// well as one that overruns its interval: 0.5ms to 30s.
var runBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// NewMetrics registers the Runners' collectors on reg; give the result to
// every Runner of the process (Options.Metrics).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_job_runs_total", Help: "Runs of a periodic job on this replica, by task and outcome (ok, failed, lost, stopped).",
		}, []string{"task", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inventory_job_run_duration_seconds", Help: "How long runs of a periodic job took, by task and outcome.", Buckets: runBuckets,
		}, []string{"task", "outcome"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inventory_job_lag_seconds", Help: "How late a periodic job's runs started after they were due, by task.", Buckets: lagBuckets,
		}, []string{"task"}),
		runner: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inventory_job_runner", Help: "1 while this replica holds a periodic job's lock and runs it, else 0, by task.",
		}, []string{"task"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inventory_job_takeovers_total", Help: "Times a periodic job came to this replica (at start, or from another holder), by task.",
		}, []string{"task"}),
	}
	reg.MustRegister(m.runs, m.seconds, m.lag, m.runner, m.takeovers)
	return m
}

// outcomes are the values of the outcome label.
var outcomes = []string{OutcomeOK, OutcomeFailed, OutcomeLost, OutcomeStopped}

// series are one task's series, looked up once: every one of them exists
// (at 0) from the Runner's start, so that rate() and increase() see the
// first failure or takeover.
type series struct {
	runs      map[string]prometheus.Counter
	seconds   map[string]prometheus.Observer
	lag       prometheus.Observer
	runner    prometheus.Gauge
	takeovers prometheus.Counter
}

func (m *Metrics) task(name string) *series {
	s := &series{
		runs: map[string]prometheus.Counter{}, seconds: map[string]prometheus.Observer{},
		lag: m.lag.WithLabelValues(name), runner: m.runner.WithLabelValues(name), takeovers: m.takeovers.WithLabelValues(name),
	}
	for _, o := range outcomes {
		s.runs[o] = m.runs.WithLabelValues(name, o)
		s.seconds[o] = m.seconds.WithLabelValues(name, o)
	}
	return s
}

// ran records one run; s may be nil (no metrics).
func (s *series) ran(outcome string, lag, took time.Duration) {
	if s == nil {
		return
	}
	s.runs[outcome].Inc()
	s.seconds[outcome].Observe(took.Seconds())
	s.lag.Observe(lag.Seconds())
}

// holding records that this replica took (with whether it is a takeover)
// or let go of the lock; s may be nil.
func (s *series) holding(held, tookOver bool) {
	if s == nil {
		return
	}
	if tookOver {
		s.takeovers.Inc()
	}
	if held {
		s.runner.Set(1)
	} else {
		s.runner.Set(0)
	}
}
