package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"inventory/internal/client"
	"inventory/internal/cpuprof"
	"inventory/internal/fleet"
	"inventory/internal/load"
	"inventory/internal/report"
)

// cpuOptions are the flags of `loadtest cpu`.
type cpuOptions struct {
	strategies, jsonOut, profileDir, binary string
	url                                     string
	clients                                 int
	window, warmup, workDelay               time.Duration
}

// defaultCPUStrategies are the sales the CPU table shows: the
// batched one, the one-sale-per-transaction baseline and the Redis lock.
const defaultCPUStrategies = "atomic,redis,batch"

func parseCPUFlags(args []string, stderr io.Writer) (cpuOptions, error) {
	var o cpuOptions
	fs := flag.NewFlagSet("loadtest cpu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  loadtest cpu [flags]  where a request's CPU goes: start a local two-replica fleet (or measure make fleet's,
                        --url), drive GET /healthz, a sold-out 409 and a sale by each strategy, one after
                        the other, with closed-loop keep-alive clients through nginx, and print the µs of
                        CPU per answer of every process, read from /proc before and after each window

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.strategies, "strategies", defaultCPUStrategies, "comma-separated strategies whose sales to measure, after GET /healthz and the sold-out answer")
	fs.IntVar(&o.clients, "clients", 64, "closed-loop clients at once, each on a keep-alive connection of its own (as wrk's connections)")
	fs.DurationVar(&o.window, "time", 5*time.Second, "how long each kind of request is measured (the window CPU and answers are counted over)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "how long the clients send before each window opens")
	fs.DurationVar(&o.workDelay, "work-delay", load.DefaultWorkDelay, "INVENTORY_WORK_DELAY for the fleet's replicas (make fleet's; 0 as in production)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file, or - for stdout (the table then goes to stderr)")
	fs.StringVar(&o.profileDir, "profile", "", "also take each replica's CPU profile (/debug/pprof/profile) of every window into this `directory`, and print the top functions of each (the profiler's own CPU is then in the figures)")
	fs.StringVar(&o.binary, "binary", "", "a built inventory binary for the fleet (default: go build it first)")
	fs.StringVar(&o.url, "url", "", "measure the fleet `make fleet` runs at this URL (its processes found from the state file it wrote, bin/fleet.json) instead of starting one; on this machine, one Postgres (not --postgres-ha)")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.url != "" && (set["binary"] || set["work-delay"]):
		return o, fmt.Errorf("%w: --binary and --work-delay are for the local fleet; the fleet at --url has its own", errUsage)
	case o.clients < 1 || o.clients > 4096:
		return o, fmt.Errorf("%w: --clients must be from 1 to 4096, got %d", errUsage, o.clients)
	case o.window < 100*time.Millisecond:
		// A tick of CPU is 10 ms: a shorter window measures ticks.
		return o, fmt.Errorf("%w: --time must be at least 100ms, got %s", errUsage, o.window)
	case o.warmup < 0, o.workDelay < 0:
		return o, fmt.Errorf("%w: --warmup and --work-delay must not be negative", errUsage)
	}
	for _, s := range cpuStrategies(o.strategies) {
		if len("cpu-"+s) > load.MaxProductID {
			return o, fmt.Errorf("%w: --strategies: %q is not a strategy's name", errUsage, s)
		}
	}
	return o, nil
}

// cpuStrategies is the list of --strategies, without blanks and repeats.
func cpuStrategies(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// runCPU is `loadtest cpu`.
func runCPU(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseCPUFlags(args, stderr)
	if err != nil {
		return err
	}
	rep := cpuprof.Report{StartedAt: time.Now().UTC().Format(time.RFC3339), Commit: commit(ctx),
		Clients: o.clients, Seconds: o.window.Seconds(), Warmup: o.warmup.Seconds(), Replicas: 2,
		WorkDelay: o.workDelay.String(), Fsync: true} // the local fleet's and make fleet's Postgres: durable
	var target cpuprof.Fleet
	if o.url == "" {
		fmt.Fprintf(stderr, "starting a local fleet: Postgres (fsync on), Redis, the lock servers, 2 replicas (INVENTORY_WORK_DELAY=%s), nginx …\n", o.workDelay)
		began := time.Now()
		f, err := fleet.Start(ctx, fleet.Options{Replicas: rep.Replicas, Binary: o.binary,
			Env: map[string]string{"INVENTORY_WORK_DELAY": o.workDelay.String()}})
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(stderr, "stopping the local fleet …")
			if err := f.Stop(); err != nil {
				fmt.Fprintln(stderr, "loadtest:", err)
			}
		}()
		fmt.Fprintf(stderr, "local fleet up in %s: nginx %s → %s\n", time.Since(began).Round(100*time.Millisecond), f.URL, replicaURLs(f))
		target = fleetOf(f)
	} else {
		if target, err = runningFleet(o.url); err != nil {
			return err
		}
		rep.Replicas, rep.WorkDelay = len(target.Replicas), cmp.Or(target.Replicas[0].Settings["INVENTORY_WORK_DELAY"], "0s")
		fmt.Fprintf(stderr, "measuring the fleet at %s: Postgres pid %d, Redis pid %d, %d replicas, nginx and the other servers under pid %d\n",
			target.URL, target.Postgres, target.Redis, len(target.Replicas), target.Parent)
	}

	api := client.New(target.URL, client.Options{AdminToken: target.AdminToken})
	kinds, err := cpuKinds(ctx, api, cpuStrategies(o.strategies))
	if err != nil {
		return err
	}
	rep.Rows, err = cpuprof.Measure(ctx, target, kinds, cpuprof.Options{
		Clients: o.clients, Duration: o.window, Warmup: o.warmup, ProfileDir: o.profileDir,
		Progress: func(msg string) { fmt.Fprintln(stderr, "  "+msg) },
	})
	if err != nil {
		return err
	}
	out := stdout
	if o.jsonOut == "-" {
		out = stderr
	}
	fmt.Fprintf(out, "µs of CPU per answer, %d clients through nginx, %s each after %s of warm-up, %d replicas, Postgres fsync on:\n",
		o.clients, o.window, o.warmup, rep.Replicas)
	cpuprof.PrintTable(out, rep.Rows)
	printCPUBudgets(ctx, out, api, rep.Rows, o.clients)
	if o.profileDir != "" {
		printTops(ctx, out, rep.Rows)
	}
	if o.jsonOut != "" {
		return report.WriteReport(o.jsonOut, stdout, rep)
	}
	return nil
}

// cpuKinds is /healthz, the sold-out answer and a sale by each strategy,
// each strategy checked against what the fleet offers.
func cpuKinds(ctx context.Context, api *client.Client, strategies []string) ([]cpuprof.Kind, error) {
	offered, err := api.Strategies(ctx)
	if err != nil {
		return nil, fmt.Errorf("the fleet's strategies: %w", err)
	}
	var names []string
	for _, s := range offered {
		names = append(names, s.Name)
	}
	kinds := []cpuprof.Kind{cpuprof.Healthz(), cpuprof.SoldOut("cpu-sold-out")}
	for _, s := range strategies {
		i := slices.IndexFunc(offered, func(o load.StrategyInfo) bool { return o.Name == s })
		switch {
		case i < 0:
			return nil, fmt.Errorf("%w: --strategies: unknown strategy %q (want some of %s)", errUsage, s, strings.Join(names, ", "))
		case !offered[i].Available:
			return nil, fmt.Errorf("--strategies: the fleet offers %s without its lock service (%s)", s, offered[i].Needs)
		}
		kinds = append(kinds, cpuprof.Sale(s, "cpu-"+s))
	}
	return kinds, nil
}

// fleetOf is the local fleet's processes as the measurement reads them:
// this process started every one of them.
func fleetOf(f *fleet.Fleet) cpuprof.Fleet {
	cf := cpuprof.Fleet{URL: f.URL, AdminToken: f.AdminToken, Postgres: f.Postgres.Pid(), Redis: f.Redis.Pid(), Parent: os.Getpid()}
	for _, r := range f.Replicas {
		cf.Replicas = append(cf.Replicas, cpuprof.Replica{Name: r.Instance, URL: r.URL, Pid: r.Pid()})
	}
	return cf
}

// runningFleet is the fleet `make fleet` runs at url, from its state file
// and /proc.
func runningFleet(url string) (cpuprof.Fleet, error) {
	path := fleet.StatePath()
	st, why := fleet.FleetAt(path, url)
	if why != "" {
		return cpuprof.Fleet{}, fmt.Errorf("--url: %s: the fleet's processes are found from the state file of make fleet", why)
	}
	ru, err := neturl.Parse(st.RedisURL)
	if err != nil || ru.Port() == "" {
		return cpuprof.Fleet{}, fmt.Errorf("--url: %s names Redis at %q: no port", path, st.RedisURL)
	}
	return cpuprof.FindFleet("/proc", st.PID, st.URL, st.AdminToken, ru.Port())
}

// printTops prints the top functions of each profile taken, by `go tool
// pprof -top`; without the go command, only where the profiles are.
func printTops(ctx context.Context, w io.Writer, rows []cpuprof.Row) {
	for _, r := range rows {
		for _, p := range r.Profiles {
			fmt.Fprintf(w, "\n%s: %s\n", r.Title, p)
			out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=12", p).Output()
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit):
				fmt.Fprintf(w, "  go tool pprof: %v: %s\n", err, strings.TrimSpace(string(exit.Stderr)))
			case err != nil:
				fmt.Fprintf(w, "  (no go tool pprof to read it: %v)\n", err)
			default:
				fmt.Fprint(w, indentLines(string(out), "  "))
			}
		}
	}
}

func indentLines(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

// printCPUBudgets prints issue 38's CPU budgets judged on rows: the
// fastest safe sale's fleet CPU against GET /healthz's, and every safe
// lock strategy's, by what the fleet says each strategy is.
func printCPUBudgets(ctx context.Context, w io.Writer, api *client.Client, rows []cpuprof.Row, clients int) {
	offered, err := api.Strategies(ctx)
	if err != nil {
		fmt.Fprintf(w, "\nbudgets not judged: the fleet's strategies: %v\n", err)
		return
	}
	var sales []load.CPUSale
	for _, r := range rows {
		i := slices.IndexFunc(offered, func(s load.StrategyInfo) bool { return s.Name == r.Kind })
		if r.Strategy == "" || i < 0 {
			continue // /healthz and the sold-out answer
		}
		sales = append(sales, load.CPUSale{Strategy: r.Kind, PerSecond: r.PerSecond, XHealthz: r.XHealthz,
			Safe: offered[i].Safe, Lock: offered[i].LockBackend != ""})
	}
	title := fmt.Sprintf("budgets (issue 38), %d clients:", clients)
	if clients != 64 {
		title = fmt.Sprintf("budgets (issue 38), %d clients (the lock strategies' budget is set at 64):", clients)
	}
	load.PrintBudgets(w, title, load.CPUBudgets(sales))
}
