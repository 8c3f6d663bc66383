package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock/backend"
	"inventory/internal/productcache"
	"inventory/internal/tracing"
)

// config is the whole configuration, read from the environment. The
// variable names are a contract (design.md): compose, the local fleet and
// external checks rely on them.
type config struct {
	Addr        string `env:"INVENTORY_ADDR" envDefault:":8080"`
	Instance    string `env:"INVENTORY_INSTANCE"` // default: the hostname
	PostgresURL string `env:"INVENTORY_POSTGRES_URL" envDefault:"postgres://postgres@127.0.0.1:5432/inventory?sslmode=disable"`
	RedisURL    string `env:"INVENTORY_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"`
	// RedisSentinels and RedisMaster, when set, reach Redis through
	// Sentinel, following a failover; INVENTORY_REDIS_URL then gives only
	// the database number and the password.
	RedisSentinels []string `env:"INVENTORY_REDIS_SENTINELS" envSeparator:","`
	RedisMaster    string   `env:"INVENTORY_REDIS_MASTER"`
	// RedisCluster, when set, are seed nodes (host:port) of a Redis
	// Cluster that the Redis strategies, the sold-out announcements and
	// the readiness check use instead of one Redis; INVENTORY_REDIS_URL
	// then gives only the user and password. redlock keeps its own servers.
	RedisCluster []string      `env:"INVENTORY_REDIS_CLUSTER" envSeparator:","`
	Strategy     string        `env:"INVENTORY_STRATEGY" envDefault:"redis"`
	AdminToken   string        `env:"INVENTORY_ADMIN_TOKEN"`
	LockTTL      time.Duration `env:"INVENTORY_LOCK_TTL" envDefault:"30s"`
	LockWait     time.Duration `env:"INVENTORY_LOCK_WAIT" envDefault:"10s"`
	WorkDelay    time.Duration `env:"INVENTORY_WORK_DELAY" envDefault:"0"`
	Migrate      bool          `env:"INVENTORY_MIGRATE" envDefault:"true"`
	MaxQuantity  int64         `env:"INVENTORY_MAX_QUANTITY" envDefault:"100"`
	// SoldOutTTL is how long a replica answers 409 from memory for a product
	// it saw sold out, unless a restock announcement ends it sooner; 0 turns
	// the fast path off.
	SoldOutTTL time.Duration `env:"INVENTORY_SOLD_OUT_TTL" envDefault:"1s"`
	// MaxWaiting is how many buyers of one product may wait inside a
	// replica at once; beyond it a buyer gets 503 at once. 0: no limit.
	MaxWaiting int `env:"INVENTORY_MAX_WAITING" envDefault:"1024"`
	// WatchdogInterval is how often the invariant watchdog checks the
	// products touched lately and refreshes the sale circuits; 0 turns both
	// off.
	WatchdogInterval time.Duration `env:"INVENTORY_WATCHDOG_INTERVAL" envDefault:"1s"`
	// ReadRate is how many anonymous reads (a product, a round, the live
	// page's data) one replica answers per second; a read over it waits
	// up to a second for its turn, then gets 429. 0: no limit; unset:
	// readsPerCPU for each CPU the replica may use (defaultReadRate).
	ReadRate float64 `env:"INVENTORY_READ_RATE"`
	// ProductCache is how anonymous product reads use the replicas' shared
	// cache (productcache.Mode): lock, nolock (the stampede, to show it)
	// or off.
	ProductCache string `env:"INVENTORY_PRODUCT_CACHE" envDefault:"lock"`
	// ProductCacheTTL is the cache's staleness bound (productcache.Options.TTL).
	ProductCacheTTL time.Duration `env:"INVENTORY_PRODUCT_CACHE_TTL" envDefault:"1s"`
	// OrderLock names the lock strategy whose locker serialises the steps
	// of one order (pay, cancel, refund, ship), or orderLockNone for no
	// lock: Postgres's guarded writes decide every step either way.
	OrderLock string `env:"INVENTORY_ORDER_LOCK" envDefault:"redis"`
	// OrderSweepInterval is how often the replica that runs the expiry job
	// expires the held orders past their deadline.
	OrderSweepInterval time.Duration `env:"INVENTORY_ORDER_SWEEP_INTERVAL" envDefault:"1s"`
	// ShutdownTimeout bounds how long in-flight requests may drain at shutdown.
	ShutdownTimeout time.Duration `env:"INVENTORY_SHUTDOWN_TIMEOUT" envDefault:"30s"`
	LogLevel        slog.Level    `env:"INVENTORY_LOG_LEVEL" envDefault:"info"`
	// Backends are the settings of the lock backends that have one
	// (backend.Descriptor.Setting: INVENTORY_REDLOCK_URLS,
	// INVENTORY_ETCD_ENDPOINTS, INVENTORY_ZOOKEEPER_SERVERS, …), by
	// variable, for those that are set: unset, a backend is not opened and
	// the strategies that take its locks are unavailable.
	Backends map[string]string
	// Tracing is whether the standard OTEL_* variables ask for traces
	// (tracing.Enabled): OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set.
	Tracing bool
}

// loadConfig reads and checks the configuration, the settings of the lock
// backends of the one list (lockBackends) included. Its errors are one line
// naming the variable at fault.
func loadConfig(getenv func(string) string) (config, error) {
	return loadConfigWith(getenv, lockBackends)
}

// loadConfigWith is loadConfig with the lock backends of list.
func loadConfigWith(getenv func(string) string, list []backend.Descriptor) (config, error) {
	var cfg config
	params, err := env.GetFieldParams(&cfg)
	if err != nil {
		return cfg, err
	}
	environ := map[string]string{}
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			environ[p.Key] = v
		}
	}
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: environ}); err != nil {
		return cfg, fmt.Errorf("config: %s", describeEnvError(err))
	}
	if cfg.Instance == "" {
		if cfg.Instance, err = os.Hostname(); err != nil || cfg.Instance == "" {
			return cfg, fmt.Errorf("config: INVENTORY_INSTANCE is unset and the hostname is unknown")
		}
	}
	if getenv("INVENTORY_READ_RATE") == "" {
		cfg.ReadRate = defaultReadRate()
	}
	cfg.Tracing = tracing.Enabled(getenv)
	cfg.Backends = map[string]string{}
	for _, d := range list {
		// A value of blanks is no value, as an unset variable.
		if v := getenv(d.Setting); d.Setting != "" && strings.TrimSpace(v) != "" {
			cfg.Backends[d.Setting] = v
		}
	}
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	if err := cfg.validateOrderLock(); err != nil {
		return cfg, err
	}
	return cfg, cfg.validateBackends(list)
}

// orderLockNone is INVENTORY_ORDER_LOCK's value for steps without a lock.
const orderLockNone = "none"

// validateOrderLock checks INVENTORY_ORDER_LOCK: none, or a strategy that
// takes its lock from a lock backend whose setting, if it has one, is set.
func (c config) validateOrderLock() error {
	if c.OrderLock == orderLockNone {
		return nil
	}
	var locking []string
	for _, s := range inventory.Strategies {
		if s.Lock != "" {
			locking = append(locking, s.Name)
		}
	}
	want := fmt.Sprintf("want %s (no lock) or a strategy whose lock serialises an order's steps: %s", orderLockNone, strings.Join(locking, ", "))
	info, err := inventory.Lookup(c.OrderLock)
	switch {
	case err != nil:
		return fmt.Errorf("config: INVENTORY_ORDER_LOCK: unknown strategy %q (%s)", c.OrderLock, want)
	case info.Lock == "":
		return fmt.Errorf("config: INVENTORY_ORDER_LOCK: strategy %q takes no lock of a lock backend (%s)", c.OrderLock, want)
	case info.Needs != "" && !c.set(info.Needs):
		return fmt.Errorf("config: INVENTORY_ORDER_LOCK: strategy %q needs %s, which is not set", c.OrderLock, info.Needs)
	}
	return nil
}

// validateBackends checks each lock backend's setting with its Check,
// masking the secrets of a setting that may hold them.
func (c config) validateBackends(list []backend.Descriptor) error {
	for _, d := range list {
		v, ok := c.Backends[d.Setting]
		if !ok || d.Check == nil {
			continue
		}
		if err := d.Check(v); err != nil {
			msg := err.Error()
			if d.Secret {
				for _, u := range strings.Split(v, ",") {
					msg = redactErr(errors.New(msg), u)
				}
			}
			return fmt.Errorf("config: %s: %s", d.Setting, msg)
		}
	}
	return nil
}

// readsPerCPU is the read budget's default, per CPU a replica may use: a
// read costs about 1.2 ms of CPU in all (nginx, the replica, Postgres;
// docs/performance.md, reads beside the sales), so a crowd of readers
// takes at most about 6% of each CPU, and the sales keep the rest. Two
// replicas on two cores: 100 reads/s each, ~0.24 of a core in all.
const readsPerCPU = 50

// defaultReadRate is INVENTORY_READ_RATE when it is unset: readsPerCPU for
// each CPU this process may use (GOMAXPROCS, which follows a container's
// CPU limit).
func defaultReadRate() float64 { return float64(readsPerCPU * runtime.GOMAXPROCS(0)) }

func (c config) validate() error {
	bad := func(name, format string, args ...any) error {
		return fmt.Errorf("config: %s: %s", name, fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return bad("INVENTORY_ADDR", "want host:port such as :8080, got %q", c.Addr)
	}
	if _, err := pgxpool.ParseConfig(c.PostgresURL); err != nil {
		return bad("INVENTORY_POSTGRES_URL", "%v", redactErr(err, c.PostgresURL))
	}
	if _, err := redis.ParseURL(c.RedisURL); err != nil {
		return bad("INVENTORY_REDIS_URL", "%v", redactErr(err, c.RedisURL))
	}
	if (len(c.RedisSentinels) == 0) != (c.RedisMaster == "") {
		return bad("INVENTORY_REDIS_SENTINELS", "set it together with INVENTORY_REDIS_MASTER, or neither")
	}
	for _, s := range c.RedisSentinels {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return bad("INVENTORY_REDIS_SENTINELS", "want comma-separated host:port, got %q", s)
		}
	}
	if len(c.RedisCluster) > 0 {
		if len(c.RedisSentinels) > 0 {
			return bad("INVENTORY_REDIS_CLUSTER", "set it or INVENTORY_REDIS_SENTINELS, not both (a Redis Cluster fails over by itself)")
		}
		if opts, _ := redis.ParseURL(c.RedisURL); opts.DB != 0 {
			return bad("INVENTORY_REDIS_CLUSTER", "a Redis Cluster has only database 0, but INVENTORY_REDIS_URL names database %d", opts.DB)
		}
	}
	for _, s := range c.RedisCluster {
		if host, port, err := net.SplitHostPort(s); err != nil || host == "" || port == "" {
			return bad("INVENTORY_REDIS_CLUSTER", "want comma-separated host:port of seed nodes, got %q", s)
		}
	}
	if info, err := inventory.Lookup(c.Strategy); err != nil {
		return bad("INVENTORY_STRATEGY", "%v", err)
	} else if info.Needs != "" && !c.set(info.Needs) {
		return bad("INVENTORY_STRATEGY", "strategy %q needs %s, which is not set", c.Strategy, info.Needs)
	}
	if c.LockTTL < 10*time.Millisecond {
		return bad("INVENTORY_LOCK_TTL", "must be at least 10ms, got %s", c.LockTTL)
	}
	if c.LockWait < 0 {
		return bad("INVENTORY_LOCK_WAIT", "must not be negative, got %s", c.LockWait)
	}
	if c.MaxWaiting < 0 {
		return bad("INVENTORY_MAX_WAITING", "must be 0 (no limit) or more, got %d", c.MaxWaiting)
	}
	if c.ReadRate < 0 || math.IsNaN(c.ReadRate) || math.IsInf(c.ReadRate, 0) {
		return bad("INVENTORY_READ_RATE", "must be 0 (no limit) or a positive number of reads per second, got %v", c.ReadRate)
	}
	if c.WatchdogInterval < 0 {
		return bad("INVENTORY_WATCHDOG_INTERVAL", "must be 0 (off) or more, got %s", c.WatchdogInterval)
	}
	if c.OrderSweepInterval < 10*time.Millisecond || c.OrderSweepInterval > time.Hour {
		return bad("INVENTORY_ORDER_SWEEP_INTERVAL", "must be between 10ms and 1h (how often held orders past their deadline expire), got %s", c.OrderSweepInterval)
	}
	if c.SoldOutTTL < 0 {
		return bad("INVENTORY_SOLD_OUT_TTL", "must be 0 (off) or more, got %s", c.SoldOutTTL)
	}
	if c.WorkDelay < 0 || c.WorkDelay >= c.LockTTL {
		return bad("INVENTORY_WORK_DELAY", "must be between 0 and the lock TTL (%s), got %s", c.LockTTL, c.WorkDelay)
	}
	if c.MaxQuantity < 1 {
		return bad("INVENTORY_MAX_QUANTITY", "must be at least 1, got %d", c.MaxQuantity)
	}
	if _, err := productcache.ParseMode(c.ProductCache); err != nil {
		return bad("INVENTORY_PRODUCT_CACHE", "want lock (the default), nolock (to show the stampede) or off, got %q", c.ProductCache)
	}
	if c.ProductCacheTTL < productcache.MinTTL || c.ProductCacheTTL > productcache.MaxTTL {
		return bad("INVENTORY_PRODUCT_CACHE_TTL", "must be between %s and %s (how old a cached product read may be), got %s",
			productcache.MinTTL, productcache.MaxTTL, c.ProductCacheTTL)
	}
	if c.ShutdownTimeout <= 0 {
		return bad("INVENTORY_SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	return nil
}

// set reports whether the variable named env has a value: a lock backend's
// setting that is set, or a config field it fills that is not its zero
// value.
func (c config) set(env string) bool {
	if _, ok := c.Backends[env]; ok {
		return true
	}
	v := reflect.ValueOf(c)
	for i, f := range reflect.VisibleFields(v.Type()) {
		if f.Tag.Get("env") == env {
			return !v.Field(i).IsZero()
		}
	}
	return false
}

// LogValue prints the configuration with secrets masked.
func (c config) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("addr", c.Addr),
		slog.String("instance", c.Instance),
		slog.String("postgres_url", redactDSN(c.PostgresURL)),
		slog.String("redis_url", redactDSN(c.RedisURL)),
		slog.Any("redis_sentinels", c.RedisSentinels),
		slog.String("redis_master", c.RedisMaster),
		slog.Any("redis_cluster", c.RedisCluster),
		slog.String("strategy", c.Strategy),
		slog.Bool("admin_enabled", c.AdminToken != ""),
		slog.Duration("lock_ttl", c.LockTTL),
		slog.Duration("lock_wait", c.LockWait),
		slog.Duration("work_delay", c.WorkDelay),
		slog.Duration("sold_out_ttl", c.SoldOutTTL),
		slog.Int("max_waiting", c.MaxWaiting),
		slog.Float64("read_rate", c.ReadRate),
		slog.String("product_cache", c.ProductCache),
		slog.Duration("product_cache_ttl", c.ProductCacheTTL),
		slog.Bool("migrate", c.Migrate),
		slog.Int64("max_quantity", c.MaxQuantity),
		slog.String("order_lock", c.OrderLock),
		slog.Duration("order_sweep_interval", c.OrderSweepInterval),
	}
	// Each lock backend's setting under its name without the prefix
	// (INVENTORY_ETCD_ENDPOINTS: etcd_endpoints), secrets masked.
	for _, d := range lockBackends {
		v, ok := c.Backends[d.Setting]
		if !ok {
			continue
		}
		key := strings.ToLower(strings.TrimPrefix(d.Setting, "INVENTORY_"))
		if d.Secret {
			attrs = append(attrs, slog.Any(key, redactDSNs(strings.Split(v, ","))))
		} else {
			attrs = append(attrs, slog.String(key, v))
		}
	}
	return slog.GroupValue(attrs...)
}

// describeEnvError names the variable at fault instead of the Go field.
func describeEnvError(err error) string {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err.Error()
	}
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			msgs = append(msgs, fmt.Sprintf("%s: cannot parse as %s: %v", envName(pe.Name), pe.Type, unwrapAll(pe.Err)))
			continue
		}
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

func envName(field string) string {
	if f, ok := reflect.TypeFor[config]().FieldByName(field); ok {
		return f.Tag.Get("env")
	}
	return field
}

func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// secretKeys are the connection settings whose values are secrets, in
// a URL's query or a keyword/value string (Postgres's password and
// sslpassword; Redis takes its password in the URL's userinfo, but a
// ?password= is hidden too).
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// redactedValue stands in for a secret.
const redactedValue = "xxxxx"

// urlScheme tells a URL ("postgres://…", "redis://…") from a keyword/value
// string ("host=… password=…"), which has no scheme.
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// secretSpan is where a secret sits in a connection string, [start, end),
// and how to read it there.
type secretSpan struct {
	start, end int
	// unescape turns the text as written into the secret as used (a URL's
	// percent-encoding, a keyword/value string's backslashes).
	unescape func(string) string
}

// secretSpans finds every secret in a connection string, in either form,
// and whether it parses or not: a URL's userinfo password and its secret
// query parameters; a keyword/value string's secret values, quoted or
// not, with spaces around "=" or not. Malformed input errs towards hiding
// more (an unterminated quoted value runs to the end).
func secretSpans(raw string) []secretSpan {
	if urlScheme.MatchString(raw) {
		return urlSecretSpans(raw)
	}
	return keywordSecretSpans(raw)
}

// urlSecretSpans reads raw as scheme://[userinfo@]hosts[/path][?query][#fragment]
// by hand, not with url.Parse: a URL naming several hosts
// (postgres://u:p@h1:5432,h2:5432/db), which Postgres takes, does not parse.
func urlSecretSpans(raw string) []secretSpan {
	unescape := func(s string) string {
		if u, err := url.PathUnescape(s); err == nil {
			return u
		}
		return s
	}
	var spans []secretSpan
	start := strings.Index(raw, "://") + len("://")
	// The userinfo ends at the last "@" before the query; its password is
	// what follows its first ":". A "/" in the password is taken; a "?"
	// or "#" in it (the URL cannot parse then) makes the last "@" of all
	// the end, which may hide more than the password.
	rest := len(raw)
	if i := strings.IndexAny(raw[start:], "?#"); i >= 0 {
		rest = start + i
	}
	at := strings.LastIndexByte(raw[start:rest], '@')
	if at < 0 {
		at = strings.LastIndexByte(raw[start:], '@')
	}
	if at >= 0 {
		if colon := strings.IndexByte(raw[start:start+at], ':'); colon >= 0 {
			spans = append(spans, secretSpan{start + colon + 1, start + at, unescape})
		}
		if start+at >= rest { // the query, if any, is past the "@"
			rest = start + at
			if i := strings.IndexAny(raw[rest:], "?#"); i >= 0 {
				rest += i
			} else {
				rest = len(raw)
			}
		}
	}
	if rest == len(raw) || raw[rest] != '?' {
		return spans
	}
	q := rest + 1
	end := len(raw)
	if f := strings.IndexByte(raw[q:], '#'); f >= 0 {
		end = q + f
	}
	queryUnescape := func(s string) string {
		if u, err := url.QueryUnescape(s); err == nil {
			return u
		}
		return s
	}
	for pos := q; pos <= end; {
		next := strings.IndexByte(raw[pos:end], '&')
		if next < 0 {
			next = end - pos
		}
		param := raw[pos : pos+next]
		if key, _, ok := strings.Cut(param, "="); ok && secretKeys[strings.ToLower(queryUnescape(key))] {
			spans = append(spans, secretSpan{pos + len(key) + 1, pos + next, queryUnescape})
		}
		pos += next + 1
	}
	return spans
}

// keywordSecretSpans reads raw as keyword/value pairs the way pgconn
// does: "key = value" or "key = 'quoted value'", a backslash escaping the
// next character in either.
func keywordSecretSpans(raw string) []secretSpan {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	unescape := func(s string) string {
		return strings.NewReplacer(`\\`, `\`, `\'`, `'`).Replace(s)
	}
	var spans []secretSpan
	for i := 0; i < len(raw); {
		eq := strings.IndexByte(raw[i:], '=')
		if eq < 0 {
			break
		}
		key := strings.ToLower(strings.TrimSpace(raw[i : i+eq]))
		i += eq + 1
		for i < len(raw) && isSpace(raw[i]) {
			i++
		}
		start, quoted := i, i < len(raw) && raw[i] == '\''
		if quoted {
			start++
		}
		j := start
		for j < len(raw) && (quoted && raw[j] != '\'' || !quoted && !isSpace(raw[j])) {
			if raw[j] == '\\' {
				j++
			}
			j++
		}
		j = min(j, len(raw))
		if secretKeys[key] {
			spans = append(spans, secretSpan{start, j, unescape})
		}
		i = j + 1
	}
	return spans
}

// redactDSN hides every secret of a connection string (see secretSpans):
// what the start line logs.
func redactDSN(raw string) string {
	spans := secretSpans(raw)
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(raw[last:sp.start])
		b.WriteString(redactedValue)
		last = sp.end
	}
	b.WriteString(raw[last:])
	return b.String()
}

// redactDSNs is redactDSN of each.
func redactDSNs(raw []string) []string {
	out := make([]string, len(raw))
	for i, u := range raw {
		out[i] = redactDSN(u)
	}
	return out
}

// redactErr keeps the secrets of raw, a connection string, out of an error
// message about it, however the message quotes them (as written, or
// unescaped).
func redactErr(err error, raw string) string {
	msg := err.Error()
	for _, sp := range secretSpans(raw) {
		written := raw[sp.start:sp.end]
		for _, secret := range []string{written, sp.unescape(written)} {
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, redactedValue)
			}
		}
	}
	return msg
}
