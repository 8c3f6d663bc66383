package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"inventory/internal/productcache"
	"inventory/internal/stampede"
)

// stampedeOptions are the flags of `loadtest stampede`.
type stampedeOptions struct {
	stampede.Options
	modes, jsonOut string
}

func parseStampedeFlags(args []string, stderr io.Writer) (stampedeOptions, error) {
	var o stampedeOptions
	fs := flag.NewFlagSet("loadtest stampede", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  loadtest stampede [flags]  the product cache under a crowd, through nginx: for each INVENTORY_PRODUCT_CACHE mode a local
                             fleet (two replicas behind nginx, INVENTORY_READ_RATE=0), then per run: one expiry (every
                             reader reads once just after the cached entry expired) and a loop (every reader reading
                             for --duration); Postgres reads from the replicas' inventory_product_reads_total{source="postgres"}

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.modes, "modes", strings.Join(stampede.Modes, ","), "comma-separated INVENTORY_PRODUCT_CACHE modes to measure, a fleet each: off (every read from Postgres: the reference), nolock (the cache without the refresh lock: the stampede), lock")
	fs.IntVar(&o.Readers, "readers", 500, "the crowd: anonymous readers of GET /products/{id} through nginx, each on a connection of its own, 1 to 5000")
	fs.DurationVar(&o.Loop, "duration", 10*time.Second, "how long each run's loop lasts (0: one expiry only)")
	fs.IntVar(&o.Runs, "runs", 3, "runs per mode, each one expiry and a loop; the summary gives the medians")
	fs.StringVar(&o.Binary, "binary", "", "a built inventory binary (default: go build it first)")
	fs.DurationVar(&o.TTL, "ttl", 0, "INVENTORY_PRODUCT_CACHE_TTL of the replicas (0: the service's default, 1s)")
	fs.StringVar(&o.jsonOut, "json", "", "also write every run as JSON to this file, or - for stdout (the table then goes to stderr)")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	for _, m := range strings.Split(o.modes, ",") {
		m = strings.TrimSpace(m)
		if _, err := productcache.ParseMode(m); err != nil {
			return o, fmt.Errorf("%w: --modes: %w", errUsage, err)
		}
		o.Modes = append(o.Modes, m)
	}
	switch {
	case o.Readers < 1 || o.Readers > 5000:
		return o, fmt.Errorf("%w: --readers must be from 1 to 5000, got %d", errUsage, o.Readers)
	case o.Runs < 1:
		return o, fmt.Errorf("%w: --runs must be at least 1, got %d", errUsage, o.Runs)
	case o.Loop < 0:
		return o, fmt.Errorf("%w: --duration must not be negative", errUsage)
	case o.TTL != 0 && (o.TTL < productcache.MinTTL || o.TTL > productcache.MaxTTL):
		return o, fmt.Errorf("%w: --ttl must be from %s to %s (the service's bounds), got %s", errUsage, productcache.MinTTL, productcache.MaxTTL, o.TTL)
	}
	return o, nil
}

// runStampede is `loadtest stampede`.
func runStampede(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseStampedeFlags(args, stderr)
	if err != nil {
		return err
	}
	out := stdout
	if o.jsonOut == "-" {
		out = stderr
	}
	o.Progress = func(msg string) { fmt.Fprintln(stderr, msg) }
	fmt.Fprintf(stderr, "%d readers of one product through nginx, modes %s, %d run(s) each: one expiry, then %s in a loop\n",
		o.Readers, strings.Join(o.Modes, ", "), o.Runs, o.Loop)
	runs, err := stampede.Measure(ctx, o.Options)
	if err != nil {
		return err
	}
	printStampede(out, runs)
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(struct {
			Readers int            `json:"readers"`
			Loop    string         `json:"loop"`
			Runs    []stampede.Run `json:"runs"`
		}{o.Readers, o.Loop.String(), runs}, "", "  ")
		if err != nil {
			return err
		}
		if o.jsonOut == "-" {
			_, err = fmt.Fprintln(stdout, string(b))
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return nil
}

// printStampede prints the medians of each mode's runs, with the range of
// the runs beside the one-expiry figure.
func printStampede(w io.Writer, runs []stampede.Run) {
	fmt.Fprintf(w, "\n%-7s %4s  %-28s %11s  %9s %10s %10s %9s %8s %8s  %s\n", "mode", "runs", "Postgres reads, one expiry", "answered in",
		"answers/s", "Postgres/s", "per 1,000", "p50 ms", "p99 ms", "not 200", "load")
	var modes []string
	for _, r := range runs {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	for _, m := range modes {
		var expiry, expiryMs, aps, pgs, per1000, p50, p99, load []float64
		var failed int64
		var reads []string
		for _, r := range runs {
			if r.Mode != m {
				continue
			}
			reads = append(reads, fmt.Sprint(r.Expiry.PostgresReads))
			expiry = append(expiry, float64(r.Expiry.PostgresReads))
			expiryMs = append(expiryMs, 1000*r.Expiry.Seconds)
			load = append(load, r.Load[0], r.Load[1])
			failed += sum(r.Expiry.Failed)
			if l := r.Loop; l != nil {
				aps, pgs, per1000 = append(aps, l.AnswersPerSecond()), append(pgs, l.PostgresPerSecond()), append(per1000, l.PostgresPer1000())
				p50, p99 = append(p50, l.P50Ms), append(p99, l.P99Ms)
				failed += sum(l.Failed)
			}
		}
		fmt.Fprintf(w, "%-7s %4d  %-28s %9.0fms  %9.0f %10.1f %10.2f %9.1f %8.1f %8d  %.1f–%.1f\n", m, len(reads),
			fmt.Sprintf("%.0f (%s)", median(expiry), strings.Join(reads, ", ")), median(expiryMs),
			median(aps), median(pgs), median(per1000), median(p50), median(p99), failed, slices.Min(load), slices.Max(load))
	}
	fmt.Fprintln(w, "medians of the runs; answers/s, Postgres/s, per 1,000 answers and the latencies are the loop's; load: the 1-minute load average")
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// median is the middle of xs (the mean of the two middle ones for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
