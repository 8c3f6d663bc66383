// Command fleet runs the local inventory stack in the foreground: Postgres
// (--postgres-ha: a primary and a synchronous standby under Patroni),
// Redis, the lock services, two inventory replicas and nginx on
// 127.0.0.1:8080 (--listen), until Ctrl-C. It is the way to try the API with
// curl on a machine without Docker. It says what it is doing while it
// builds and starts, writes every process's log under a directory it names
// first, and exits 0 when stopped with Ctrl-C or SIGTERM.
//
// While it runs, it says where the fleet is in a state file (--state,
// bin/fleet.json under the module's root; removed when it stops): the load
// tester, given the fleet's URL, reads the fleet's Postgres from it, so
// that its verdicts come from the database; and it prints the load
// tester's command, ready to paste.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"inventory/internal/fleet"
	"inventory/internal/inventory"
	"inventory/nginx"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "nginx's `host:port`: where buyers and curl call (make fleet LISTEN=...)")
	replicas := fs.Int("replicas", 2, "inventory replicas behind nginx")
	token := fs.String("admin-token", "demo-admin-token", "INVENTORY_ADMIN_TOKEN of the replicas")
	workDelay := fs.Duration("work-delay", 2*time.Millisecond, "INVENTORY_WORK_DELAY of the replicas (widens races; 0 in production)")
	readRate := fs.Float64("read-rate", 0, "INVENTORY_READ_RATE of the replicas: anonymous reads each answers per second, a read over it waiting up to 1s and then 429 (0: no limit; not given: the replicas' default, 50 a CPU)")
	watchdog := fs.Duration("watchdog-interval", time.Second, "INVENTORY_WATCHDOG_INTERVAL of the replicas: how often the invariant watchdog checks the stock and opens circuits (0: off)")
	clientRate := fs.Int("limit-client-rate", nginx.DefaultLimits.ClientRate, "nginx: requests per second one client address may send, 429 beyond (0: off)")
	clientBurst := fs.Int("limit-client-burst", nginx.DefaultLimits.ClientBurst, "nginx: requests over -limit-client-rate let through at once")
	productSales := fs.Int("limit-product-sales", nginx.DefaultLimits.ProductSales, "nginx: sales of one product in flight on POST /products/{id}/sale, 429 beyond (0: off)")
	redisCluster := fs.Bool("redis-cluster", false, "run the Redis strategies and the sold-out announcements on a Redis Cluster (3 masters, a replica each: INVENTORY_REDIS_CLUSTER)")
	postgresHA := fs.Bool("postgres-ha", false, "run Postgres as a primary and a synchronous standby under Patroni (DCS: an etcd of its own); the replicas follow a failover by themselves")
	postgresAsync := fs.Bool("postgres-async", false, "like --postgres-ha, the standby asynchronous: faster commits, and a failover loses the last ones acknowledged")
	logDir := fs.String("logs", "", "`directory` for every process's log file (default: a new one under $TMPDIR, kept after the fleet stops)")
	statePath := fs.String("state", fleet.StatePath(), "`file` that says where the running fleet is (URL, admin token, Postgres and Redis URLs), for the load tester, and its shell's copy beside it (fleet.env, for make psql); removed when the fleet stops")
	strategy := fs.String("strategy", "redis", "the fleet default `strategy` the replicas start with (INVENTORY_STRATEGY; make fleet STRATEGY=...): "+strings.Join(inventory.Names(), ", "))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !(*readRate >= 0) || math.IsInf(*readRate, 0) {
		return fmt.Errorf("want --read-rate >= 0 (reads per second; 0: no limit), got %v", *readRate)
	}
	if *replicas < 1 || *workDelay < 0 || *watchdog < 0 {
		return fmt.Errorf("want --replicas >= 1, --work-delay >= 0 and --watchdog-interval >= 0, got %d, %s and %s", *replicas, *workDelay, *watchdog)
	}
	// Before anything slow: a bad name or a busy address would fail only
	// after the build and every server had started.
	if _, err := inventory.Lookup(*strategy); err != nil {
		return fmt.Errorf("--strategy: %w", err)
	}
	if err := checkFree(*listen); err != nil {
		return err
	}
	if *logDir == "" {
		dir, err := os.MkdirTemp("", "inventory-fleet-logs-")
		if err != nil {
			return fmt.Errorf("log directory: %w", err)
		}
		*logDir = dir
	}

	start := time.Now()
	say := func(msg string) {
		el := time.Since(start).Round(time.Second)
		fmt.Fprintf(stderr, "[fleet %d:%02d] %s\n", int(el.Minutes()), int(el.Seconds())%60, msg)
	}
	say("logs: " + *logDir)
	// The replicas' database is new, so none holds a default yet: each
	// starts with INVENTORY_STRATEGY's.
	env := map[string]string{"INVENTORY_WORK_DELAY": workDelay.String(), "INVENTORY_WATCHDOG_INTERVAL": watchdog.String(), "INVENTORY_STRATEGY": *strategy}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "read-rate" { // else the replicas' own default
			env["INVENTORY_READ_RATE"] = strconv.FormatFloat(*readRate, 'g', -1, 64)
		}
	})
	limits := nginx.Limits{ClientRate: *clientRate, ClientBurst: *clientBurst, ProductSales: *productSales}
	f, err := fleet.Start(ctx, fleet.Options{
		Replicas:      *replicas,
		Env:           env,
		AdminToken:    *token,
		Listen:        *listen,
		Limits:        limits,
		NoLimits:      limits == nginx.Limits{},
		LogDir:        *logDir,
		Progress:      say,
		PostgresHA:    *postgresHA,
		PostgresAsync: *postgresAsync,
		RedisCluster:  *redisCluster,
	})
	if err != nil {
		if ctx.Err() != nil { // Ctrl-C while starting: what was started is stopped
			say("interrupted while starting; stopped")
			return nil
		}
		return err
	}
	defer f.Stop()

	state := fleet.State{URL: f.URL, AdminToken: f.AdminToken, PostgresURL: f.PostgresURL, RedisURL: f.RedisURL, Strategy: *strategy,
		Logs: *logDir, PID: os.Getpid(), StartedAt: time.Now().UTC()}
	if err := fleet.WriteState(*statePath, state); err != nil {
		return err
	}
	defer func() {
		if err := fleet.RemoveState(*statePath, state.PID); err != nil {
			say(err.Error())
		}
	}()

	say("up")
	fmt.Fprintf(stdout, "inventory is up at %s (admin token %q; fleet default strategy %s)\n", f.URL, f.AdminToken, *strategy)
	for _, r := range f.Replicas {
		fmt.Fprintf(stdout, "  replica %s at %s (pid %d)\n", r.Instance, r.URL, r.Pid())
	}
	fmt.Fprintf(stdout, "  postgres %s\n", f.PostgresURL)
	if f.Patroni != nil {
		for _, m := range f.Patroni.Members {
			fmt.Fprintf(stdout, "    patroni %s: postgres on port %d, REST API %s (GET /cluster, /primary)\n", m.Name, m.Port, m.API)
		}
	}
	fmt.Fprintf(stdout, "  redis    %s\n  logs     %s\n  state    %s and %s\n", f.RedisURL, *logDir, *statePath, fleet.EnvPath(*statePath))
	if f.RedisCluster != nil {
		fmt.Fprintf(stdout, "  the Redis strategies use the Redis Cluster at %s\n", strings.Join(f.RedisCluster.Seeds(), ","))
	}
	fmt.Fprintf(stdout, "Load test it, the verdicts read from Postgres (from the repository; it finds Postgres in %s):\n  %s\n",
		*statePath, loadtestCommand(f.URL, f.AdminToken, ""))
	fmt.Fprintf(stdout, "or, from anywhere, naming Postgres:\n  %s\n", loadtestCommand(f.URL, f.AdminToken, f.PostgresURL))
	fmt.Fprintf(stdout, "Query its Postgres (from the repository; make psql alone for a psql prompt):\n  %s\nor, from anywhere:\n  psql %s\n",
		psqlExample, fleet.ShellQuote(f.PostgresURL))
	fmt.Fprintln(stdout, "Ctrl-C stops everything (the data goes with it; the logs stay).")
	<-ctx.Done()
	// Gone first: a load tester must not find the Postgres that is stopping.
	if err := fleet.RemoveState(*statePath, state.PID); err != nil {
		say(err.Error())
	}
	say("stopping …")
	if err := f.Stop(); err != nil {
		return err
	}
	say("stopped; logs in " + *logDir)
	return nil
}

// psqlExample is the query the fleet suggests: what each strategy sold of
// each round's stock, from the ledger.
const psqlExample = `make psql Q='select product_id, round, strategy, sum(quantity) as sold, initial from sales join rounds using (product_id, round) group by 1, 2, 3, 5 order by 1, 2, 3'`

// loadtestCommand is the load tester's command against the fleet at url,
// naming its Postgres when pgURL is not empty.
func loadtestCommand(url, token, pgURL string) string {
	cmd := fmt.Sprintf("go run ./loadtest --url %s --admin-token %s", url, token)
	if pgURL != "" {
		cmd += " --postgres-url '" + pgURL + "'"
	}
	return cmd + " --stock 100 --buyers 150 --strategies none,local,redis,atomic"
}

// checkFree reports whether addr can be listened on, naming the flag and
// the way out when it cannot.
func checkFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln.Close()
	}
	suggest := "127.0.0.1:18080"
	if host, _, splitErr := net.SplitHostPort(addr); splitErr == nil {
		if free, err := net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
			suggest = free.Addr().String()
			_ = free.Close()
		}
	}
	return fmt.Errorf("--listen %s: cannot listen there (%w); is another fleet running? Choose another address, e.g. make fleet LISTEN=%s (free now)", addr, err, suggest)
}
