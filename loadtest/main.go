// Command loadtest fires concurrent buyers at an inventory fleet, one
// strategy at a time, and proves from the database whether each strategy
// oversold. Naming a strategy per sale is an admin call: the buyers send
// the admin token it restocks with.
//
// With no --url it starts a local fleet (Postgres, Redis, two replicas and
// nginx on loopback ports; see internal/fleet), runs every strategy, prints
// the verdict table and stops everything. With --url it drives a running
// fleet, e.g. docker compose's nginx on http://localhost:8080.
//
// --mix, --restock-during and --switch-during add the design's harder cases:
// every safe strategy selling one product at once, a restock racing the
// buyers (every round is then checked on its own), and the fleet default
// switched while sales are in flight. --products N sells N products at
// once, buyers picking by a seeded Zipf choice (--zipf), each product
// checked on its own.
//
// `loadtest faults` runs the fault matrix instead: every strategy × every
// fault of internal/faults, N faulted runs per cell, against a local fleet
// (internal/faults/matrix; `loadtest faults -h` lists its flags).
// `loadtest cpu` measures where a request's CPU goes, per process of a
// local fleet (internal/cpuprof).
// `loadtest results` keeps the measured runs of docs/results and the doc
// tables written from them (internal/results): `results record KIND --
// FLAGS` runs the load tester and appends the run.
//
// Every run's history of answers is checked, product by product, against
// one sequential stock (internal/history): a safe strategy whose answers no
// order of events explains is NOT LINEARIZABLE, and porcupine's page of it
// is written beside the report; one whose history was not checked to the
// end is INCONCLUSIVE, never a pass. The state each run is checked against
// is read from Postgres: the local fleet's, --postgres-url's, or, given
// only --url, the one `make fleet` named in its state file (bin/fleet.json)
// for the fleet at that URL. Without any, it is read through the service's
// API, and the table says its verdicts are UNVERIFIED.
//
// Exit status: 0 when every safe strategy kept its invariants, 1 when one
// was BROKEN (oversold, lost an update, disagreed with its ledger, or failed
// requests), NOT LINEARIZABLE (an answer that cannot be true) or
// INCONCLUSIVE (its history not checked to the end), 2 for bad flags.
// UNDERSOLD (503s while stock remained) is reported but does not fail the
// run: it is a capacity limit, not oversell. Lock breaches (the lock broke
// and the database refused the write) are counted but do not fail the run
// either: the invariants held.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"inventory/internal/fleet"
	"inventory/internal/history"
	"inventory/internal/load"
	"inventory/internal/report"
	"inventory/internal/verdict"
)

func main() {
	// go-redis prints its own chatter (connections the pool drops when a
	// measurement's deadline cuts a command short, reconnects while a fault
	// is injected) to stderr, between the progress lines. Every error the
	// load tester acts on comes back from the call that met it.
	redis.SetLogger(quietRedis{})
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// quietRedis is a go-redis logger that drops every message.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var (
	errUsage = load.ErrUsage // exit status 2
	// errBroken is returned after the table is printed when a safe strategy was BROKEN.
	errBroken = errors.New("a safe strategy failed (see BROKEN, ORDERS BROKEN, NOT LINEARIZABLE, STUCK or INCONCLUSIVE above)")
)

// subcommands are the load tester's other commands, `loadtest <name>`;
// -h lists them.
var subcommands = []struct {
	name, does string
	run        func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}{
	{"faults", "run the fault matrix: every strategy × fault, N faulted runs per cell", runFaults},
	{"results", "append a run to docs/results and rewrite the doc tables made from them", runResults},
	{"cpu", "where a request's CPU goes: µs per answer of every process, /healthz to a sale", runCPU},
	{"stampede", "the product cache under 500 readers through nginx: Postgres reads per expiry and per second, without the lock and with it", runStampede},
}

type options struct {
	url, adminToken, product, strategies, jsonOut string
	htmlOut, binary                               string
	stock                                         int64
	buyers, concurrency, runs                     int
	workDelay, lockWait, lockTTL                  time.Duration
	watchdogInterval                              time.Duration
	mix, restockDuring, byProduct, ceilings, wide bool
	ceilingTime, historyTimeout                   time.Duration
	postgresURL, redisURL                         string
	switchEvery                                   int
	products                                      int
	clientIPs                                     int
	zipf                                          float64
	readers                                       int
	seedLedger                                    int64
	// The order scenario (--hold and the flags after it).
	hold, abandon, cancel, payAtDeadline, refund, ship float64
	payWithin, sweepBound                              time.Duration
	retrySteps                                         bool
	// ordersAfter, when set, runs the order scenario as one row of this
	// strategy after the others, which then sell outright (--orders-after).
	ordersAfter string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  %-24s fire buyers at a fleet, a row per strategy, and print the verdict table\n", "loadtest [flags]")
		for _, c := range subcommands {
			fmt.Fprintf(fs.Output(), "  %-24s %s (loadtest %s -h lists its flags)\n", "loadtest "+c.name+" [flags]", c.does, c.name)
		}
		fmt.Fprint(fs.Output(), "\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.url, "url", "", "base URL of a running fleet (e.g. http://localhost:8080); empty starts a local fleet")
	fs.StringVar(&o.adminToken, "admin-token", os.Getenv("INVENTORY_ADMIN_TOKEN"), "admin bearer token of the fleet at --url, for restocking, naming a strategy per sale and switching the default (default $INVENTORY_ADMIN_TOKEN)")
	fs.StringVar(&o.product, "product", "sku-loadtest", "product id to restock and sell")
	fs.Int64Var(&o.stock, "stock", 1000, "units in stock at the start of each strategy's run (of each product, with --products)")
	fs.IntVar(&o.buyers, "buyers", 1500, "buyers per strategy, each buying one unit (in all, with --products)")
	fs.IntVar(&o.products, "products", 1, "sell this many products at once, `N` from 1 to 10000: <--product>-1 … <--product>-N, each buyer picking one by a Zipf choice (--zipf), product 1 the hottest; each product is restocked to --stock and checked on its own, and the row sums them. Combines with --mix, --restock-during (every product restocked), --switch-during, --by-product and --ceilings (sold-out phase on product 1)")
	fs.Float64Var(&o.zipf, "zipf", load.DefaultZipf, "with --products: the Zipf exponent `s` (above 1; higher: hotter few products) of the buyers' choice, P(product k) ∝ k^-s; the choice is seeded with the run number, so the same flags pick the same products")
	fs.IntVar(&o.concurrency, "concurrency", 64, "buyers in flight at once")
	fs.StringVar(&o.strategies, "strategies", "", "comma-separated strategies to run (default: every one the fleet offers)")
	fs.StringVar(&o.binary, "binary", "", "a built inventory binary for the local fleet (default: go build it first)")
	fs.StringVar(&o.htmlOut, "html", "", "also write a self-contained HTML report (charts, no internet needed) to this file")
	fs.BoolVar(&o.wide, "wide", false, "print every figure in the table (errors, breaches, ledger, lost, undersold, rounds, p50 to max, per replica, history; about 200 columns) instead of the 100-column one")
	fs.StringVar(&o.jsonOut, "json", "", "also write the figures as JSON to this file, or - for stdout (the table then goes to stderr)")
	fs.IntVar(&o.runs, "runs", 1, "run every row this many times (to measure how reproducible the oversell is)")
	fs.DurationVar(&o.workDelay, "work-delay", load.DefaultWorkDelay, "INVENTORY_WORK_DELAY for the local fleet's replicas (widens the race window)")
	fs.DurationVar(&o.lockWait, "lock-wait", 0, "INVENTORY_LOCK_WAIT for the local fleet's replicas (0: the service's default)")
	fs.DurationVar(&o.lockTTL, "lock-ttl", 0, "INVENTORY_LOCK_TTL for the local fleet's replicas (0: the service's default, 30s); once a sale spends longer than this inside its lock, setnx oversells and the safe lock strategies turn buyers away (at least 10ms, above --work-delay)")
	fs.DurationVar(&o.watchdogInterval, "watchdog-interval", time.Second, "INVENTORY_WATCHDOG_INTERVAL for the local fleet's replicas (the service's default): how often the invariant watchdog checks the stock and opens circuits; 0 turns it off, to measure its cost")
	fs.BoolVar(&o.mix, "mix", false, "after the per-strategy rows, a row \"mix\": every selected safe strategy sells the one product at once, buyers taking them round robin")
	fs.BoolVar(&o.restockDuring, "restock-during", false, "in every run, restock the product (same stock) once a third of the buyers have been answered, so the run spans two rounds; each round is checked on its own")
	fs.BoolVar(&o.ceilings, "ceilings", false, "also measure, in this run, what the strategies are compared against: the minimal one-sale transaction (guarded UPDATE and ledger INSERT) on one row straight to Postgres (like pgbench, 8 clients), Redis round trips, GET /healthz through nginx; and after each strategy's row, its sold-out answers per second; then print issue 38's budgets (ratio, target, met), medians over --runs")
	fs.DurationVar(&o.ceilingTime, "ceiling-time", 5*time.Second, "how long --ceilings measures each figure")
	fs.StringVar(&o.postgresURL, "postgres-url", "", "with --url: the fleet's Postgres, to read the state each run is checked against (stock, rounds, ledger) from the database instead of the service's API, and for --ceilings' hot-row ceiling (the local fleet's is known; without it, the one `make fleet` named in bin/fleet.json for the fleet at --url; with neither, the verdicts are UNVERIFIED)")
	fs.DurationVar(&o.historyTimeout, "history-timeout", 0, "a fixed bound on checking each window of a product's history of answers (porcupine); past it the product is INCONCLUSIVE, and a safe strategy's run with an INCONCLUSIVE history fails (default: 10s plus 1ms per op of the window)")
	fs.StringVar(&o.redisURL, "redis-url", "", "with --url and --ceilings: the fleet's Redis, for the Redis ceiling (the local fleet's is known)")
	fs.BoolVar(&o.byProduct, "by-product", false, "sell through POST /products/{id}/sale, which nginx routes to one replica per product (consistent hashing), instead of POST /sale (round robin)")
	fs.IntVar(&o.clientIPs, "client-ips", 0, "send from `N` loopback source addresses, 127.0.0.2 up, each request from the next in turn, so that a gateway limiting each client address (the fleet's nginx limit_req) sees N clients; for a fleet on this machine (0: from the one address the system picks)")
	fs.IntVar(&o.switchEvery, "switch-during", 0, "a row \"switch\": buyers name no strategy while the fleet default (PUT /strategy) is switched among the selected safe strategies every `N` answered buyers; the previous default is restored afterwards (0: no such row)")
	fs.IntVar(&o.readers, "readers", 0, "keep `N` anonymous readers asking GET /live?since=0 and GET /products/{id} while the buyers buy (reads must not starve sales: compare p99 and 503s with --readers 0)")
	fs.Int64Var(&o.seedLedger, "seed-ledger", 0, "before the runs, write `N` sales of product <--product>-ledger straight into the fleet's ledger (restocked to N, then sold out), to measure --readers against a large ledger; needs the fleet's Postgres (--postgres-url with --url)")
	fs.Float64Var(&o.hold, "hold", 0, "the fraction `F` (0–1) of buyers that hold units for an order (pay_within) instead of buying outright, and take it through its life: pay, cancel, refund, ship, or abandon it to the expiry job; the run waits for every held order to end and checks every order invariant in Postgres (0: no orders, as before)")
	fs.DurationVar(&o.payWithin, "pay-within", 2*time.Second, "with --hold: each hold's pay_within (1s to 24h); short, so that a run sees its abandoned orders expire")
	fs.Float64Var(&o.abandon, "abandon", 0.3, "with --hold: the fraction of holders that never pay (the expiry job returns their units)")
	fs.Float64Var(&o.cancel, "cancel", 0.2, "with --hold: the fraction of holders that cancel after a random delay of up to 200ms")
	fs.Float64Var(&o.payAtDeadline, "pay-at-deadline", 0.2, "with --hold: the fraction of holders that pay within 30ms of the deadline, racing the expiry job (200 or 409 order-expired, both true)")
	fs.Float64Var(&o.refund, "refund", 0.2, "with --hold: the fraction of the orders paid at once that are refunded (their units come back)")
	fs.Float64Var(&o.ship, "ship", 0.5, "with --hold: the fraction of the other orders paid at once that are shipped")
	fs.BoolVar(&o.retrySteps, "retry-steps", false, "with --hold: send every pay, cancel, refund and ship twice, as a double click or a payment provider's retry does (a step whose answer said nothing is always sent again)")
	fs.StringVar(&o.ordersAfter, "orders-after", "", "after the rows, one more row, `STRATEGY`+orders: STRATEGY's buyers with the order scenario of --hold and the flags after it (which then apply to that row alone; the other rows sell outright), started over three --pay-within so that the crowd is still buying when the abandoned and cancelled units come back; the line under the orders table says how many came back and how many were sold again (make demo runs it)")
	fs.DurationVar(&o.sweepBound, "sweep-bound", 0, "with --hold: how late after its deadline the expiry job may expire a held order, INVENTORY_ORDER_SWEEP_INTERVAL + INVENTORY_LOCK_TTL + 1s (default: the local fleet's, from --lock-ttl; with --url the service's defaults, 32s)")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.sweepBound == 0 {
		ttl := o.lockTTL
		if ttl == 0 || o.url != "" {
			ttl = 30 * time.Second // the service's INVENTORY_LOCK_TTL default
		}
		o.sweepBound = load.SweepBound(ttl, time.Second) // the service's INVENTORY_ORDER_SWEEP_INTERVAL default
	}
	orderFlag := ""
	for _, name := range []string{"pay-within", "abandon", "cancel", "pay-at-deadline", "refund", "ship", "retry-steps", "sweep-bound"} {
		if set[name] && orderFlag == "" {
			orderFlag = name
		}
	}
	switch {
	case o.ordersAfter != "" && o.hold == 0:
		return o, fmt.Errorf("%w: --orders-after needs --hold: the fraction of that row's buyers that hold", errUsage)
	case o.hold == 0 && orderFlag != "":
		return o, fmt.Errorf("%w: --%s only applies with --hold", errUsage, orderFlag)
	case o.hold != 0 && (o.restockDuring || o.switchEvery > 0 || o.mix):
		return o, fmt.Errorf("%w: --hold is checked one strategy and one round at a time: not with --restock-during, --switch-during or --mix", errUsage)
	}
	if o.hold != 0 {
		if err := o.orderScenario().Validate(); err != nil {
			return o, fmt.Errorf("%w: --hold: %w", errUsage, err)
		}
	}
	switch {
	case o.url != "" && set["work-delay"]:
		return o, fmt.Errorf("%w: --work-delay only applies to the local fleet; a running fleet has its own INVENTORY_WORK_DELAY", errUsage)
	case o.url != "" && set["lock-wait"]:
		return o, fmt.Errorf("%w: --lock-wait only applies to the local fleet; a running fleet has its own INVENTORY_LOCK_WAIT", errUsage)
	case o.url != "" && set["lock-ttl"]:
		return o, fmt.Errorf("%w: --lock-ttl only applies to the local fleet; a running fleet has its own INVENTORY_LOCK_TTL", errUsage)
	case o.url != "" && set["watchdog-interval"]:
		return o, fmt.Errorf("%w: --watchdog-interval only applies to the local fleet; a running fleet has its own INVENTORY_WATCHDOG_INTERVAL", errUsage)
	case o.watchdogInterval < 0:
		return o, fmt.Errorf("%w: --watchdog-interval must be 0 (off) or more", errUsage)
	case o.url != "" && o.adminToken == "":
		return o, fmt.Errorf("%w: --url needs --admin-token (or INVENTORY_ADMIN_TOKEN) to restock the product", errUsage)
	case o.stock < 1, o.buyers < 1, o.concurrency < 1, o.runs < 1:
		return o, fmt.Errorf("%w: --stock, --buyers, --concurrency and --runs must be at least 1", errUsage)
	case o.products < 1 || o.products > load.MaxProducts:
		return o, fmt.Errorf("%w: --products must be from 1 to %d, got %d", errUsage, load.MaxProducts, o.products)
	case !(o.zipf > 1) || math.IsInf(o.zipf, 0):
		return o, fmt.Errorf("%w: --zipf must be a number above 1, got %v", errUsage, o.zipf)
	case set["zipf"] && o.products == 1:
		return o, fmt.Errorf("%w: --zipf only applies with --products above 1", errUsage)
	case o.products > 1 && len(fmt.Sprintf("%s-%d", o.product, o.products)) > load.MaxProductID:
		return o, fmt.Errorf("%w: --product %q is too long for --products %d: %s-%d would pass the service's %d-character limit on product ids",
			errUsage, o.product, o.products, o.product, o.products, load.MaxProductID)
	case o.readers < 0 || o.readers > 1000:
		return o, fmt.Errorf("%w: --readers must be from 0 to 1000, got %d", errUsage, o.readers)
	case o.seedLedger < 0 || o.seedLedger > 100_000_000:
		return o, fmt.Errorf("%w: --seed-ledger must be from 0 to 100000000, got %d", errUsage, o.seedLedger)
	case o.seedLedger > 0 && o.url != "" && o.postgresURL == "":
		return o, fmt.Errorf("%w: --seed-ledger writes to the fleet's Postgres: with --url it needs --postgres-url", errUsage)
	case o.seedLedger > 0 && len(o.product)+len("-ledger") > load.MaxProductID:
		return o, fmt.Errorf("%w: --product %q is too long for --seed-ledger: %s-ledger would pass the service's %d-character limit on product ids", errUsage, o.product, o.product, load.MaxProductID)
	case o.switchEvery < 0:
		return o, fmt.Errorf("%w: --switch-during must not be negative", errUsage)
	case o.workDelay < 0, o.lockWait < 0:
		return o, fmt.Errorf("%w: --work-delay and --lock-wait must not be negative", errUsage)
	case o.lockTTL != 0 && (o.lockTTL < 10*time.Millisecond || o.lockTTL <= o.workDelay):
		// The service refuses these at start (INVENTORY_LOCK_TTL, INVENTORY_WORK_DELAY).
		return o, fmt.Errorf("%w: --lock-ttl must be at least 10ms and above --work-delay (%s)", errUsage, o.workDelay)
	case o.ceilingTime <= 0:
		return o, fmt.Errorf("%w: --ceiling-time must be positive", errUsage)
	case o.historyTimeout < 0:
		return o, fmt.Errorf("%w: --history-timeout must be positive (or 0 for the default budget)", errUsage)
	case o.url != "" && o.binary != "":
		return o, fmt.Errorf("%w: --binary is for the local fleet; a running fleet at --url has its own", errUsage)
	case o.url == "" && (o.postgresURL != "" || o.redisURL != ""):
		return o, fmt.Errorf("%w: --postgres-url and --redis-url are for a fleet given by --url; the local fleet's are known", errUsage)
	}
	if _, err := load.ClientSources(o.clientIPs, o.url); err != nil {
		return o, fmt.Errorf("%w: --client-ips: %w", errUsage, err)
	}
	return o, nil
}

// parse parses args into fs: flag.ErrHelp for -h, a usage error for a bad
// flag or an argument left over.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		for _, c := range subcommands {
			if args[0] == c.name {
				return c.run(ctx, args[1:], stdout, stderr)
			}
		}
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	rep := report.Report{
		Target: o.url, LocalFleet: o.url == "", Product: o.product, Stock: o.stock,
		Buyers: o.buyers, Concurrency: o.concurrency, Runs: o.runs,
		Mix: o.mix, RestockDuring: o.restockDuring, SwitchEvery: o.switchEvery,
		StartedAt: time.Now().UTC().Format(time.RFC3339), Commit: commit(ctx),
		WorkDelay: "set by the running fleet",
	}
	if o.products > 1 {
		rep.Products, rep.Zipf = o.products, o.zipf
	}
	if o.url == "" {
		rep.WorkDelay = o.workDelay.String()
		env := map[string]string{"INVENTORY_WORK_DELAY": o.workDelay.String()}
		settings := "INVENTORY_WORK_DELAY=" + o.workDelay.String()
		if o.lockTTL > 0 {
			rep.LockTTL = o.lockTTL.String()
			env["INVENTORY_LOCK_TTL"] = rep.LockTTL
			settings += ", INVENTORY_LOCK_TTL=" + rep.LockTTL
		}
		env["INVENTORY_WATCHDOG_INTERVAL"] = o.watchdogInterval.String()
		settings += ", INVENTORY_WATCHDOG_INTERVAL=" + o.watchdogInterval.String()
		if o.lockWait > 0 {
			env["INVENTORY_LOCK_WAIT"] = o.lockWait.String()
			settings += ", INVENTORY_LOCK_WAIT=" + o.lockWait.String()
		}
		fmt.Fprintf(stderr, "starting a local fleet: Postgres, Redis, 2 replicas (%s), nginx …\n", settings)
		began := time.Now()
		f, err := fleet.Start(ctx, fleet.Options{Replicas: 2, Binary: o.binary, Env: env})
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(stderr, "stopping the local fleet …")
			if err := f.Stop(); err != nil {
				fmt.Fprintln(stderr, "loadtest:", err)
			}
		}()
		rep.Target, o.adminToken = f.URL, f.AdminToken
		o.postgresURL, o.redisURL = f.PostgresURL, f.RedisURL
		fmt.Fprintf(stderr, "local fleet up in %s: nginx %s → %s\n", time.Since(began).Round(100*time.Millisecond), f.URL, replicaURLs(f))
	}

	if o.url != "" && o.postgresURL == "" {
		// make fleet says where its Postgres is: read the truth there.
		path := fleet.StatePath()
		if st, why := fleet.FleetAt(path, o.url); why == "" {
			o.postgresURL = st.PostgresURL
			if o.redisURL == "" {
				o.redisURL = st.RedisURL
			}
			fmt.Fprintf(stderr, "reading each run's state from the fleet's Postgres, %s (named in %s)\n", st.PostgresURL, path)
		} else {
			fmt.Fprintf(stderr, "no Postgres for %s (%s): each run's state is read through the service's API, and the verdicts are UNVERIFIED; give --postgres-url\n", o.url, why)
		}
	}
	rep.Verified = o.postgresURL != ""

	sources, err := load.ClientSources(o.clientIPs, rep.Target)
	if err != nil {
		return err
	}
	c := load.NewClient(rep.Target, o.adminToken, o.concurrency, sources)
	c.ByProduct = o.byProduct
	defer c.Close()
	strategies, err := load.PickStrategies(ctx, c, o.strategies, stderr)
	if err != nil {
		return err
	}
	rows, err := scenarios(strategies, o)
	if err != nil {
		return err
	}
	afterRow, err := ordersAfterRow(ctx, c, o, stderr)
	if err != nil {
		return err
	}
	extra := ""
	if o.restockDuring {
		extra = ", restocked once a third of the buyers are answered"
	}
	if o.byProduct {
		extra += ", sold by POST /products/{id}/sale (one replica per product)"
	}
	against := fmt.Sprintf("%d in stock", o.stock)
	if o.products > 1 {
		against = fmt.Sprintf("%d products × %d in stock (%s-1 … %s-%d, Zipf s=%g: product 1 the hottest)", o.products, o.stock, o.product, o.product, o.products, o.zipf)
	}
	fmt.Fprintf(stderr, "%d buyers × 1 unit against %s%s, %d at a time, work delay %s, %d row%s × %d run(s)\n",
		o.buyers, against, extra, o.concurrency, rep.WorkDelay, len(rows), plural(len(rows), "", "s"), o.runs)

	if o.ceilings {
		fmt.Fprintf(stderr, "measuring the ceilings, %s each …\n", o.ceilingTime)
		ceil, err := load.MeasureCeilings(ctx, c, o.postgresURL, o.redisURL, o.concurrency, o.products, o.ceilingTime)
		if err != nil {
			return err
		}
		rep.Ceilings = &ceil
	}

	if o.seedLedger > 0 {
		id := o.product + "-ledger"
		fmt.Fprintf(stderr, "seeding the ledger with %d sales of %s …\n", o.seedLedger, id)
		n, err := load.SeedLedger(ctx, c, o.postgresURL, id, o.seedLedger)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "the ledger has %d rows\n", n)
	}
	cfg := load.Config{Product: o.product, Stock: o.stock, Buyers: o.buyers, Concurrency: o.concurrency, RestockDuring: o.restockDuring,
		Products: o.products, Zipf: o.zipf, PostgresURL: o.postgresURL, HistoryTimeout: o.historyTimeout, Readers: o.readers}
	if o.hold != 0 {
		if o.postgresURL == "" {
			return fmt.Errorf("%w: --hold checks every order invariant in the fleet's Postgres: give --postgres-url", errUsage)
		}
	}
	if o.hold != 0 && o.ordersAfter == "" {
		cfg.Orders = o.orderScenario()
		fmt.Fprintf(stderr, "%.0f%% of the buyers hold for %s: %.0f%% of them abandon, %.0f%% cancel, %.0f%% pay at the deadline, the rest pay; expiries due within %s of their deadline\n",
			100*o.hold, o.payWithin, 100*o.abandon, 100*o.cancel, 100*o.payAtDeadline, o.sweepBound)
	}
	results, err := load.RunTable(ctx, c, cfg, rows, load.TableOptions{
		Runs: o.runs, Ceilings: o.ceilings, CeilingTime: o.ceilingTime, PostgresURL: o.postgresURL, Progress: &bars{w: stderr, buyers: o.buyers},
	})
	if err != nil {
		return err
	}
	if afterRow != nil {
		more, err := runOrdersAfter(ctx, c, cfg, *afterRow, o, &rep, stderr)
		if err != nil {
			return err
		}
		results = append(results, more...)
	}
	for _, res := range results {
		rep.Results = append(rep.Results, res)
		rep.Failed = rep.Failed || verdict.Failing(res.Verdict)
	}

	if err := writeHistoryPages(&rep, o, stderr); err != nil {
		return err
	}
	tableOut := stdout
	if o.jsonOut == "-" {
		tableOut = stderr
	}
	if rep.Ceilings != nil {
		rep.Ceilings.Serial = report.MedianSerial(rep.Results)
		rep.Ceilings.Budgets = load.RunBudgets(*rep.Ceilings, rep.Results)
	}
	report.PrintTable(tableOut, rep, o.wide)
	report.PrintCeilings(tableOut, rep)
	if rep.Ceilings != nil {
		load.PrintBudgets(tableOut, fmt.Sprintf("budgets (issue 38), each the median over the runs (--runs %d) against the ceilings above:", o.runs), rep.Ceilings.Budgets)
	}
	report.PrintReads(tableOut, rep)
	report.PrintOrders(tableOut, rep)
	report.PrintComeback(tableOut, rep)
	for _, note := range load.CircuitNotes(rep.Results, rep.Target) {
		fmt.Fprintln(tableOut, note)
	}
	if undersold := countVerdict(rep.Results, verdict.Undersold); undersold > 0 {
		fmt.Fprintf(tableOut, "note: %d run(s) UNDERSOLD: buyers got 503 because the lock wait ran out while stock remained; no oversell, but raise INVENTORY_LOCK_WAIT or lower --concurrency.\n", undersold)
	}
	if o.jsonOut != "" {
		if err := report.WriteReport(o.jsonOut, stdout, rep); err != nil {
			return err
		}
	}
	if o.htmlOut != "" {
		if err := report.WriteHTML(o.htmlOut, &rep, nil); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: %s\n", report.AbsPath(o.htmlOut))
	}
	if rep.Failed {
		return errBroken
	}
	return nil
}

// orderScenario is the order scenario the flags ask for.
func (o options) orderScenario() *load.OrderScenario {
	return &load.OrderScenario{Hold: o.hold, PayWithin: o.payWithin, Abandon: o.abandon, Cancel: o.cancel, PayAtDeadline: o.payAtDeadline,
		Refund: o.refund, Ship: o.ship, RetrySteps: o.retrySteps, SweepBound: o.sweepBound}
}

// writeHistoryPages writes porcupine's page of every product whose history
// was NOT LINEARIZABLE beside --html or --json (else in a new temporary
// directory) and prints each path.
func writeHistoryPages(rep *report.Report, o options, stderr io.Writer) error {
	failed := false
	for _, r := range rep.Results {
		failed = failed || r.History != nil && r.History.Verdict == string(history.NotLinearizable)
	}
	if !failed {
		return nil
	}
	dir := ""
	if o.htmlOut == "" && (o.jsonOut == "" || o.jsonOut == "-") {
		var err error
		if dir, err = os.MkdirTemp("", "loadtest-history-"); err != nil {
			return err
		}
	}
	paths, err := report.WriteHistoryPages(report.HistoryBase(o.htmlOut, o.jsonOut, dir), rep)
	for _, p := range paths {
		fmt.Fprintf(stderr, "history not linearizable, visualized: %s\n", report.AbsPath(p))
	}
	return err
}

// scenarios is the table's rows: one per strategy, then mix and switch
// when asked for.
func scenarios(strategies []load.StrategyInfo, o options) ([]load.Scenario, error) {
	var rows []load.Scenario
	var safe []string
	for _, s := range strategies {
		rows = append(rows, load.Single(s))
		if s.Safe {
			safe = append(safe, s.Name)
		}
	}
	if (o.mix || o.switchEvery > 0) && len(safe) == 0 {
		return nil, fmt.Errorf("%w: --mix and --switch-during need at least one safe strategy among those selected", errUsage)
	}
	if o.mix {
		rows = append(rows, load.Scenario{Name: load.RowMix, Safe: true, Sell: safe})
	}
	if o.switchEvery > 0 {
		rows = append(rows, load.Scenario{Name: load.RowSwitch, Safe: true, Switch: safe, SwitchEvery: o.switchEvery})
	}
	return rows, nil
}

// bars shows RunTable's progress on w: a bar per run on a terminal, else
// one line per run once it is done.
type bars struct {
	w      io.Writer
	buyers int
	bar    *progressbar.ProgressBar // the current run's, on a terminal
}

func (b *bars) Start(row string, run int) func() {
	b.bar = newBar(b.w, b.buyers, fmt.Sprintf("%-10s run %d", row, run))
	if b.bar == nil {
		return nil
	}
	bar := b.bar
	return func() { _ = bar.Add(1) }
}

func (b *bars) Done(row string, run int, res load.Result, err error) {
	if b.bar == nil {
		if err == nil { // no terminal: one line per row instead of a bar
			fmt.Fprintf(b.w, "  %-10s run %d: %s in %.1fs\n", row, run, res.Verdict, res.Seconds)
		}
		return
	}
	if err == nil {
		_ = b.bar.Finish()
	} else {
		_ = b.bar.Exit() // leave the bar where the interrupt stopped it
	}
	fmt.Fprintln(b.w)
}

// newBar returns a progress bar on w when w is a terminal, else nil.
func newBar(w io.Writer, n int, desc string) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("buyers"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
	)
}

// commit is the revision the load tester was built from (go build stamps
// it), else the working tree's (go run does not), "-dirty" when it had
// changes; empty when neither is known. The report names it.
func commit(ctx context.Context) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			rev = rev[:min(12, len(rev))]
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func replicaURLs(f *fleet.Fleet) string {
	var parts []string
	for _, r := range f.Replicas {
		parts = append(parts, r.Instance+" "+r.URL)
	}
	return strings.Join(parts, ", ")
}

func countVerdict(results []load.Result, verdict string) int {
	n := 0
	for _, r := range results {
		if r.Verdict == verdict {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
