package stampede

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	apiclient "inventory/internal/client"
	"inventory/internal/fleet"
)

// Modes are INVENTORY_PRODUCT_CACHE's values, in the order a measurement
// runs them: the reference without a cache, then the cache without the
// refresh lock, then with it.
var Modes = []string{"off", "nolock", "lock"}

// Options is one measurement: a local fleet per mode, runs of one expiry
// and a loop on each.
type Options struct {
	// Modes are the INVENTORY_PRODUCT_CACHE modes measured, one fleet each
	// (the mode is a replica's setting at start). Default: Modes.
	Modes []string
	// Readers is the crowd's size. Default 500.
	Readers int
	// Loop is how long each run's loop lasts; 0 measures no loop.
	Loop time.Duration
	// Runs is the runs per mode, each one expiry and a loop. Default 1.
	Runs int
	// Binary is a built inventory binary; empty builds one (fleet.Options).
	Binary string
	// TTL is the replicas' INVENTORY_PRODUCT_CACHE_TTL; 0: the service's
	// default (1s).
	TTL time.Duration
	// Progress, if set, is told of each fleet and each run as it ends.
	Progress func(msg string)
}

// Env is what the fleet of one mode runs with: the mode, the TTL if given,
// and no read budget (INVENTORY_READ_RATE=0), which would otherwise pace
// anonymous readers at 50 a CPU per replica and keep the crowd from
// reaching the cache at all. nginx keeps its limits as shipped (20,000
// requests a second per client address, far above what two replicas on
// this machine answer).
func (o Options) Env(mode string) map[string]string {
	env := map[string]string{"INVENTORY_PRODUCT_CACHE": mode, "INVENTORY_READ_RATE": "0"}
	if o.TTL > 0 {
		env["INVENTORY_PRODUCT_CACHE_TTL"] = o.TTL.String()
	}
	return env
}

// Run is one run of one mode.
type Run struct {
	Mode string `json:"mode"`
	Run  int    `json:"run"`
	// Expiry is the crowd that came back just after the entry expired.
	Expiry Crowd `json:"one_expiry"`
	// Loop is the crowd reading in a loop; nil when not measured.
	Loop *Crowd `json:"loop,omitempty"`
	// Load is the machine's 1-minute load average before and after the
	// run (0 where /proc/loadavg cannot be read).
	Load [2]float64 `json:"load"`
}

// Product is the product a measurement reads.
const Product = "sku-stampede"

// Measure runs o: for each mode a local fleet of two replicas behind
// nginx (no lock services: the cache's lock is Redis's), the product
// created, then o.Runs runs of one expiry and a loop, and the fleet
// stopped.
func Measure(ctx context.Context, o Options) ([]Run, error) {
	if len(o.Modes) == 0 {
		o.Modes = Modes
	}
	if o.Readers <= 0 {
		o.Readers = 500
	}
	o.Runs = max(o.Runs, 1)
	var out []Run
	for _, mode := range o.Modes {
		runs, err := measureMode(ctx, o, mode)
		if err != nil {
			return out, fmt.Errorf("mode %s: %w", mode, err)
		}
		out = append(out, runs...)
	}
	return out, nil
}

func measureMode(ctx context.Context, o Options, mode string) (_ []Run, err error) {
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	began := time.Now()
	f, err := fleet.Start(ctx, fleet.Options{Replicas: 2, Binary: o.Binary, NoLockServices: true, Env: o.Env(mode)})
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopErr := f.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	say("%s: a fleet up in %s (INVENTORY_PRODUCT_CACHE=%s, INVENTORY_READ_RATE=0)", mode, time.Since(began).Round(100*time.Millisecond), mode)
	admin := apiclient.New(f.URL, apiclient.Options{AdminToken: f.AdminToken})
	defer admin.CloseIdleConnections()
	if _, err := admin.Restock(ctx, Product, apiclient.RestockRequest{Quantity: 1000, Name: "stampede"}); err != nil {
		return nil, fmt.Errorf("create %s: %w", Product, err)
	}
	t := Target{URL: f.URL, RedisURL: f.RedisURL, Product: Product}
	for _, r := range f.Replicas {
		t.Replicas = append(t.Replicas, r.URL)
	}
	var runs []Run
	for i := 1; i <= o.Runs; i++ {
		r := Run{Mode: mode, Run: i}
		r.Load[0] = LoadAverage()
		if r.Expiry, err = OneExpiry(ctx, t, o.Readers); err != nil {
			return runs, err
		}
		if o.Loop > 0 {
			loop, err := Loop(ctx, t, o.Readers, o.Loop)
			if err != nil {
				return runs, err
			}
			r.Loop = &loop
		}
		r.Load[1] = LoadAverage()
		runs = append(runs, r)
		say("%s", r)
	}
	return runs, nil
}

// String is the run on one line.
func (r Run) String() string {
	s := fmt.Sprintf("%s run %d: one expiry, %d readers: %d Postgres reads, all answered in %.0f ms", r.Mode, r.Run, r.Expiry.Readers,
		r.Expiry.PostgresReads, 1000*r.Expiry.Seconds)
	if n := failures(r.Expiry); n != "" {
		s += " (not 200: " + n + ")"
	}
	if l := r.Loop; l != nil {
		s += fmt.Sprintf("; in a loop for %.1f s: %.0f answers/s, %.1f Postgres reads/s (%.2f per 1,000 answers), p50 %.1f ms, p99 %.1f ms",
			l.Seconds, l.AnswersPerSecond(), l.PostgresPerSecond(), l.PostgresPer1000(), l.P50Ms, l.P99Ms)
		if n := failures(*l); n != "" {
			s += " (not 200: " + n + ")"
		}
	}
	return s + fmt.Sprintf("; load average %.1f → %.1f", r.Load[0], r.Load[1])
}

func failures(c Crowd) string {
	var parts []string
	for k, v := range c.Failed {
		parts = append(parts, fmt.Sprintf("%d × %s", v, k))
	}
	return strings.Join(parts, ", ")
}

// LoadAverage is the machine's 1-minute load average, 0 when it cannot be
// read (not Linux).
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
