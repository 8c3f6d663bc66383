package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"inventory/internal/api"
	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/metrics"
	"inventory/internal/postgres"
	"inventory/internal/productcache"
	"inventory/internal/settings"
	"inventory/internal/stock"
	"inventory/internal/tracing"
	"inventory/internal/watchdog"
	"inventory/migrations"
)

const usage = `usage: inventory [command]

commands:
  serve              serve the HTTP API (the default)
  migrate            apply database migrations and exit
  healthcheck [URL]  exit 0 if URL (default http://127.0.0.1:PORT/readyz) answers 200
  help               show this text

Configuration comes from INVENTORY_* environment variables; see README.md.
`

// defaultPoolSize is the Postgres pool size unless the URL sets pool_max_conns.
const defaultPoolSize = 16

// clusterReload is how old a Redis Cluster client's slot map may grow.
const clusterReload = time.Second

// run is the whole program; main only reports its error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	command := "serve"
	if len(args) > 0 {
		command, args = args[0], args[1:]
	}
	switch command {
	case "serve", "migrate":
		if len(args) > 0 {
			return fmt.Errorf("%s takes no arguments, got %q", command, args)
		}
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("instance", cfg.Instance)
		if command == "migrate" {
			return migrate(ctx, cfg, log)
		}
		return serve(ctx, cfg, log)
	case "healthcheck":
		return healthcheck(ctx, args, getenv)
	case "help", "-h", "-help", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate, healthcheck or help)", command)
	}
}

// serve runs the HTTP API until ctx ends, then drains in-flight requests
// before closing Redis and Postgres.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	redis.SetLogger(redisLogger{log})
	pool, rdb, err := connect(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	defer rdb.Close()

	if cfg.Migrate {
		if err := applyMigrations(ctx, pool); err != nil {
			return err
		}
	}

	if cfg.Tracing {
		shutdown, err := tracing.Setup(ctx, cfg.Instance)
		if err != nil {
			return err
		}
		// Deferred first, so run last: after the drain, the spans it made
		// are flushed too.
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				log.Warn("tracing: flushing spans", "err", err)
			}
		}()
		log.Info("tracing on: spans go over OTLP (OTEL_EXPORTER_OTLP_* settings)")
	}

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	metrics.RegisterPools(reg, pool, rdb)
	// Readiness and the backends' round trips on /metrics come from a
	// ping every second on a connection of its own, never from the
	// request: anyone may ask, as often as they like, at no cost to sales.
	healthPool, err := sidePool(ctx, pool, "inventory-health", 1, readTimeout)
	if err != nil {
		return err
	}
	defer healthPool.Close()
	backends := metrics.NewBackends(map[string]metrics.Pinger{
		"postgres": healthPool.Ping,
		"redis":    func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
	}, metrics.BackendOptions{})
	reg.MustRegister(backends)
	backends.Check(ctx) // ready from the first request on
	{
		var checking sync.WaitGroup
		checkCtx, stopChecking := context.WithCancel(ctx)
		defer checking.Wait()
		defer stopChecking()
		checking.Go(func() { backends.Run(checkCtx) })
	}

	// Anyone may read products and the live page: those reads have a few
	// connections of their own and a statement timeout, so however many
	// and however slow, they cannot take the connections sales need.
	reads, err := sidePool(ctx, pool, "inventory-reads", readConns, readTimeout)
	if err != nil {
		return err
	}
	defer reads.Close()
	// A sale's transaction waits for the hot row no longer than a buyer
	// waits for a lock, and is idle only during the simulated work: a
	// replica paused longer than that, or than a lock's lease, loses its
	// transaction and its row lock.
	store := postgres.NewStore(pool, postgres.Limits{
		LockTimeout: cfg.LockWait,
		IdleTimeout: min(cfg.LockTTL, cfg.WorkDelay+5*time.Second),
		Reads:       reads,
	})
	lockers, closeLockers, err := openLockers(ctx, cfg, lockBackends, pool, rdb, store, m, log)
	if err != nil {
		return err
	}
	defer closeLockers() // after the drain: in-flight sales release their locks first
	deps := stock.Deps{
		Store:      store,
		Redis:      rdb,
		Instance:   cfg.Instance,
		Lockers:    lockers,
		Wait:       cfg.LockWait,
		WorkDelay:  cfg.WorkDelay,
		OnConflict: m.OptimisticConflict,
		// Always on: a few MB at most, and the fault matrix reads it.
		Holds: stock.NewHoldLog(stock.DefaultHoldCapacity),
	}
	// Safe strategies answer the crowd after the last unit from memory;
	// the unsafe ones are left as they are, oversells and all.
	soldOut := stock.NewSoldOut(cfg.SoldOutTTL, store, cfg.Instance+"-"+uuid.NewString())
	if cfg.SoldOutTTL > 0 {
		var listening sync.WaitGroup
		listenCtx, stopListening := context.WithCancel(ctx)
		defer listening.Wait()
		defer stopListening()
		listening.Go(func() { soldOut.Listen(listenCtx, rdb, log) })
	}
	// The steps of one order are serialised by the locker of one lock
	// strategy (INVENTORY_ORDER_LOCK, checked by loadConfig); Postgres's
	// guarded writes decide them.
	orders := stock.Orders{Store: store, Returns: stock.Restocker{Store: store, Redis: rdb, Marks: soldOut}, Instance: cfg.Instance}
	if cfg.OrderLock != orderLockNone {
		if orders.Lock = lockers[cfg.OrderLock]; orders.Lock == nil {
			return fmt.Errorf("config: INVENTORY_ORDER_LOCK: strategy %q has no lock in this replica", cfg.OrderLock)
		}
	}
	// The expiry job: one replica at a time sweeps the held orders past
	// their deadline. Stopped after the drain (deferred later, so run
	// earlier than closeLockers: its release needs the locker).
	expiry, err := newExpiryJob(cfg, lockers, orders, store, m, reg, log)
	if err != nil {
		return err
	}
	var sweeping sync.WaitGroup
	sweepCtx, stopSweeping := context.WithCancel(context.WithoutCancel(ctx))
	defer sweeping.Wait()
	defer stopSweeping()
	sweeping.Go(func() {
		if err := expiry.Run(sweepCtx); err != nil && sweepCtx.Err() == nil {
			log.Error("the expiry job stopped", "err", err)
		}
	})
	// One bound per product across every strategy in this replica.
	admission := stock.NewAdmission(cfg.MaxWaiting)
	sellers := make(map[string]inventory.Seller)
	for _, info := range inventory.Strategies {
		s, err := stock.New(info.Name, deps)
		if errors.Is(err, inventory.ErrNotConfigured) {
			// Listed as unavailable; its sales get 503 strategy-unavailable.
			if info.Name == cfg.Strategy {
				return fmt.Errorf("config: INVENTORY_STRATEGY: %w", err)
			}
			log.Info("strategy unavailable", "strategy", info.Name, "needs", info.Needs)
			continue
		}
		if err != nil {
			return err
		}
		if cfg.MaxWaiting > 0 {
			s = admission.Wrap(s)
		}
		if info.Safe && cfg.SoldOutTTL > 0 {
			s = soldOut.Wrap(s)
		}
		sellers[info.Name] = s
	}
	// The default's reads and leases have connections of their own: a pool
	// full of sales must not hold up a renewal until the lease runs out, and
	// tests that look for a sale's open transaction can tell them apart.
	settingsPool, err := sidePool(ctx, pool, settings.ApplicationName, 2, 0)
	if err != nil {
		return err
	}
	defer settingsPool.Close()
	defaultStrategy := settings.NewStrategy(settingsPool, func(name string) error { _, err := inventory.Lookup(name); return err },
		settings.Options{Instance: cfg.Instance, Logger: log})
	if err := defaultStrategy.Init(ctx, cfg.Strategy); err != nil {
		return err
	}
	{
		// Stopped after the drain (deferred later, so run earlier): the
		// lease is given up once no sale can use it any more.
		var following sync.WaitGroup
		followCtx, stopFollowing := context.WithCancel(context.WithoutCancel(ctx))
		defer following.Wait()
		defer stopFollowing()
		following.Go(func() { defaultStrategy.Run(followCtx) })
	}

	// The invariant watchdog: stopped after the drain, like the default's
	// lease, so a sale in flight is still checked.
	var circuits *watchdog.Circuits
	if cfg.WatchdogInterval > 0 {
		watchPool, err := sidePool(ctx, pool, "inventory-watchdog", 2, readTimeout)
		if err != nil {
			return err
		}
		defer watchPool.Close()
		circuits = watchdog.NewCircuits(watchPool)
		// A restock announced starts a round no circuit covers.
		soldOut.OnRestock(circuits.Recheck)
		var watching sync.WaitGroup
		watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
		defer watching.Wait()
		defer stopWatching()
		wd := watchdog.New(watchPool, circuits, watchdog.Options{
			Interval: cfg.WatchdogInterval, Instance: cfg.Instance, Logger: log, Observer: m,
		})
		watching.Go(func() { wd.Run(watchCtx) })
	}

	// The product cache's refresh locks are a Mutex of their own: leased
	// for the cache's TTL (a refresher that died holds nobody up past
	// the entry's own life), and kept out of the sale locks' metrics.
	// Closed after the drain, with the reads that take them.
	refreshLocks := redislock.NewMutex(rdb, redislock.Options{Options: lock.Options{TTL: cfg.ProductCacheTTL}})
	defer refreshLocks.Close()
	productCache, err := productcache.New(rdb, store.Product, productcache.Options{
		Mode: productcache.Mode(cfg.ProductCache), TTL: cfg.ProductCacheTTL, Locker: refreshLocks,
		Observer: metrics.NewProductReads(reg), Logger: log,
	})
	if err != nil {
		return err
	}

	var notes map[string]string
	if len(cfg.RedisCluster) > 0 {
		notes = map[string]string{inventory.Redlock: redlockOnCluster}
	}
	handler, err := api.NewServer(api.Config{
		Notes:   notes,
		Sellers: sellers, Store: store, Redis: rdb, Default: defaultStrategy,
		Instance: cfg.Instance, AdminToken: cfg.AdminToken, MaxQuantity: cfg.MaxQuantity,
		Logger: log, Metrics: m, Gatherer: reg, SoldOut: soldOut, Holds: deps.Holds, Circuits: circuits, Tracing: cfg.Tracing,
		ReadRate: cfg.ReadRate, Readiness: backends, ProductCache: productCache, Orders: orders,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      cfg.LockWait + 20*time.Second, // a sale may wait LockWait for its lock, then commit
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	log.Info("serving", "addr", ln.Addr().String(), "config", cfg)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		return fmt.Errorf("drain in-flight requests: %w", err)
	}
	log.Info("stopped")
	return nil
}

// redlockOnCluster is added to redlock's description in GET /strategies
// when Redis is a cluster.
const redlockOnCluster = "INVENTORY_REDIS_CLUSTER does not change its servers: it locks on the independent servers of INVENTORY_REDLOCK_URLS, never on the cluster, because Redlock over the masters of one Redis Cluster is not Redlock (a key lives on one master, which the cluster fails over by itself)"

// readTimeout is the statement_timeout of the reads anyone may make.
const readTimeout = 2 * time.Second

// readConns is how many of the reads anyone may make run at once in one
// replica; the rest wait their turn. Few: readers in a tight loop take the
// CPU of as many Postgres backends as they are given, and on a small
// machine that CPU is the sales' (docs/performance.md, reads beside sales).
const readConns = 2

// sidePool opens a small pool to pool's database for one kind of work,
// named in pg_stat_activity by application_name, its statements bounded by
// statementTimeout when it is not 0. Every name starts with "inventory-":
// the fault runner tells a sale's transaction (on the main pool, unnamed)
// from theirs by that prefix.
func sidePool(ctx context.Context, pool *pgxpool.Pool, name string, conns int32, statementTimeout time.Duration) (*pgxpool.Pool, error) {
	cfg := pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = conns, 0
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	// Plan every statement for its values: a generic plan is made for an
	// average product, and when one product dominates the ledger, that plan
	// scans the whole ledger to sum one small round.
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	if statementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(statementTimeout.Milliseconds(), 10)
	}
	side, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool %s: %w", name, err)
	}
	return side, nil
}

// connect opens the Postgres pool and the Redis client, waiting a while for
// either to come up (containers and replicas often start together).
func connect(ctx context.Context, cfg config, log *slog.Logger) (*pgxpool.Pool, redis.UniversalClient, error) {
	pgCfg, err := pgxpool.ParseConfig(cfg.PostgresURL)
	if err != nil {
		return nil, nil, fmt.Errorf("INVENTORY_POSTGRES_URL: %w", err)
	}
	if !strings.Contains(cfg.PostgresURL, "pool_max_conns") {
		pgCfg.MaxConns = defaultPoolSize
	}
	pool, err := pgxpool.NewWithConfig(ctx, pgCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres pool: %w", err)
	}
	redisOpts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("INVENTORY_REDIS_URL: %w", err)
	}
	var rdb redis.UniversalClient
	switch {
	case len(cfg.RedisSentinels) > 0:
		// The URL's database and password, the primary found through Sentinel.
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    cfg.RedisMaster,
			SentinelAddrs: cfg.RedisSentinels,
			DB:            redisOpts.DB,
			Username:      redisOpts.Username,
			Password:      redisOpts.Password,
		})
	case len(cfg.RedisCluster) > 0:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    cfg.RedisCluster,
			Username: redisOpts.Username,
			Password: redisOpts.Password,
			// go-redis reloads the slot map when a node answers MOVED, not
			// when a master stops answering: with its 60 s default a
			// replica would go on dialling a dead master for up to a
			// minute after its replica took over. A reload is one CLUSTER
			// SLOTS, made only while the client is in use.
			ClusterStateReloadInterval: clusterReload,
		})
	default:
		rdb = redis.NewClient(redisOpts)
	}

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		pgErr := pool.Ping(waitCtx)
		redisErr := rdb.Ping(waitCtx).Err()
		if pgErr == nil && redisErr == nil {
			return pool, rdb, nil
		}
		log.Warn("waiting for backends", "postgres_err", pgErr, "redis_err", redisErr)
		select {
		case <-waitCtx.Done():
			pool.Close()
			_ = rdb.Close()
			return nil, nil, fmt.Errorf("backends not reachable (postgres: %v; redis: %v)", pgErr, redisErr)
		case <-time.After(delay):
		}
	}
}

func applyMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func migrate(ctx context.Context, cfg config, log *slog.Logger) error {
	pool, rdb, err := connect(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	defer rdb.Close()
	if err := applyMigrations(ctx, pool); err != nil {
		return err
	}
	log.Info("migrations applied")
	return nil
}

// healthcheck probes the readiness endpoint, for container health checks in
// images that have no curl.
func healthcheck(ctx context.Context, args []string, getenv func(string) string) error {
	target := ""
	switch len(args) {
	case 0:
		addr := getenv("INVENTORY_ADDR")
		if addr == "" {
			addr = ":8080"
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("healthcheck: INVENTORY_ADDR %q: %w", addr, err)
		}
		target = "http://127.0.0.1:" + port + "/readyz"
	case 1:
		target = args[0]
	default:
		return errors.New("healthcheck takes at most one URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", target, resp.Status)
	}
	return nil
}
