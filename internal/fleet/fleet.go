// Package fleet starts the whole inventory stack on this machine without
// Docker: a real Postgres and Redis, the servers of every lock backend
// that has servers of its own (backends.All, each started by its
// Descriptor: etcd, ZooKeeper, three Redis servers for Redlock), N
// replicas of the inventory binary, and nginx in front of them using the
// config in nginx/, all on free loopback ports, and tears every process
// down again.
package fleet

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"inventory/internal/client"
	"inventory/internal/localstack"
	"inventory/internal/localstack/netproxy"
	"inventory/internal/lock/backend"
	"inventory/internal/lock/backends"
	"inventory/nginx"
)

// Options configures a local fleet. The zero value starts two replicas of a
// freshly built binary against a durable Postgres.
type Options struct {
	// Replicas is the number of inventory processes behind nginx; default 2.
	Replicas int
	// Binary is the path of a built inventory binary. Empty means build
	// ./cmd/inventory of the module in the current directory (or above)
	// into a temporary directory that Stop removes.
	Binary string
	// Env is extra environment for every replica, e.g.
	// {"INVENTORY_WORK_DELAY": "2ms"}. It is applied last, so it can
	// override anything except INVENTORY_ADDR and INVENTORY_INSTANCE.
	Env map[string]string
	// AdminToken is INVENTORY_ADMIN_TOKEN for the replicas; empty means a
	// random one, readable as Fleet.AdminToken.
	AdminToken string
	// NoFsync runs Postgres with fsync and synchronous_commit off: faster,
	// but the figures no longer match a durable database. Default false.
	NoFsync bool
	// ReadyTimeout bounds how long each replica may take to answer 200 on
	// /readyz (migrations included); default 60s.
	ReadyTimeout time.Duration
	// Listen is nginx's host:port, e.g. "127.0.0.1:8080"; empty means a
	// free loopback port.
	Listen string
	// Limits are nginx's gateway limits (429 too-many-requests); the zero
	// value is nginx.DefaultLimits, as nginx.conf ships them (sized so that
	// the load tester and the tests, from one address, fit). A non-zero
	// value is taken as it is, a zero field off.
	Limits nginx.Limits
	// NoLimits turns every gateway limit off (a benchmark's baseline).
	// Default false. The replicas' own read budget (INVENTORY_READ_RATE,
	// on by default) is set through Env.
	NoLimits bool
	// NetLinks puts a proxy (netproxy.Proxy) between each replica and
	// Postgres and Redis, for the network faults (Replica.PostgresLink,
	// Replica.RedisLink). Default false: replicas dial the servers directly.
	NetLinks bool
	// RedisReplica starts a second Redis replicating the first
	// (Fleet.RedisReplica). Default false.
	RedisReplica bool
	// RedisSentinel starts the Redis replica (it implies RedisReplica) and
	// a Sentinel watching the primary as master SentinelMaster
	// (Fleet.Sentinel), and the replicas find Redis through it
	// (INVENTORY_REDIS_SENTINELS, INVENTORY_REDIS_MASTER): when the
	// Sentinel promotes the replica, they follow. Their Redis traffic then
	// bypasses NetLinks, so Replica.RedisLink stays nil (their Postgres
	// links are still made). Default false.
	RedisSentinel bool
	// RedisCluster starts a Redis Cluster (Fleet.RedisCluster: three
	// masters with a replica each) that the replicas use for every Redis
	// strategy and the sold-out announcements (INVENTORY_REDIS_CLUSTER);
	// Fleet.Redis still runs, unused by them. Their cluster traffic
	// bypasses NetLinks. Default false.
	RedisCluster bool
	// FakeClock starts the fleet's Redis and the first Redlock server under
	// libfaketime (localstack.RedisOptions.FakeClock), so that their wall
	// clocks can be moved while they run (Redis.SetClock: the clock-jump
	// fault). Default false: real clocks, nothing preloaded.
	FakeClock bool
	// PostgresHA runs Postgres as a primary and a synchronous standby under
	// Patroni (localstack.StartPatroni; Fleet.Patroni), its DCS an etcd of
	// its own (Fleet.Etcd), not the etcdlock backend's. The replicas connect
	// with a URL naming both members (target_session_attrs=read-write) and
	// follow a failover by themselves; NetLinks then makes no links to
	// Postgres (a link goes to one server), so Replica.PostgresLink stays
	// nil. Default false: one Postgres (Fleet.Postgres).
	PostgresHA bool
	// PostgresAsync is PostgresHA with the standby replicating
	// asynchronously (synchronous_commit local): faster commits, and a
	// failover loses the last ones acknowledged. It implies PostgresHA.
	PostgresAsync bool
	// NoLockServices leaves out the servers of the lock backends that have
	// their own (three more Redis servers, etcd, ZooKeeper), whose
	// strategies are then unavailable. Default false: they are started too.
	NoLockServices bool
	// Progress, if set, is told what Start is doing as each step begins,
	// and every few seconds how the build is going (the first build takes
	// a minute or two). Default nil: Start says nothing.
	Progress func(msg string)
	// LogDir, if set, is a directory that gets one file per process of the
	// fleet (inventory-1.log, nginx.log, postgres.log, redis.log,
	// redlock-1.log, etcd.log, zookeeper.log, …): the last 256 KiB of its
	// output, rewritten every second while the fleet runs and once more
	// when Stop has stopped everything (and when Start fails). Default "":
	// output is kept in memory only, for error reports.
	LogDir string
}

// Fleet is a running local stack. Stop it when done.
type Fleet struct {
	// URL is nginx's base URL, e.g. "http://127.0.0.1:41234": what buyers call.
	URL string
	// Replicas are the inventory processes, in upstream order.
	Replicas []*Replica
	// PostgresURL points at the "inventory" database.
	PostgresURL string
	// RedisURL points at the Redis server.
	RedisURL string
	// AdminToken is the bearer token the replicas accept for admin calls.
	AdminToken string
	// Postgres is the database server, for fault tests (Pid, SIGSTOP);
	// nil with Options.PostgresHA.
	Postgres *localstack.Postgres
	// Patroni is the Postgres primary and standby with
	// Options.PostgresHA (PostgresURL names both); else nil.
	Patroni *localstack.Patroni
	// Redis is the Redis server the replicas use, for fault tests (Pid,
	// Restart loses every key).
	Redis *localstack.Redis
	// RedisReplica replicates Redis when Options.RedisReplica or
	// Options.RedisSentinel is set; else nil.
	RedisReplica *localstack.Redis
	// Sentinel watches Redis as master SentinelMaster when
	// Options.RedisSentinel is set; else nil.
	Sentinel *localstack.Sentinel
	// RedisCluster is the cluster the replicas use when
	// Options.RedisCluster is set; else nil.
	RedisCluster *localstack.RedisCluster
	// LockServers are the servers of the lock backends that have servers
	// of their own, each started by its Descriptor (Server), by the
	// backend's setting (INVENTORY_ETCD_ENDPOINTS: etcd, …); empty with
	// Options.NoLockServices. The replicas' settings point at them
	// (LockSettings).
	LockServers map[string]backend.Servers
	// RedlockServers are the Redis servers among them (redlock's three,
	// the first under libfaketime with Options.FakeClock), for the faults
	// that restart a Redis or move its clock; nil with
	// Options.NoLockServices.
	RedlockServers []*localstack.Redis
	// Etcd is Patroni's DCS with Options.PostgresHA; else nil.
	Etcd *localstack.Etcd
	// Nginx is the load balancer; Nginx.Logs() helps when a request fails.
	Nginx *localstack.Nginx

	links    []*netproxy.Proxy // every replica's links, stopped with the fleet
	tmpDir   string            // holds the built binary; "" when Options.Binary was given
	stopOnce sync.Once

	logDir      string         // Options.LogDir
	logsStop    chan struct{}  // closed by Stop: the log writer's last round
	logsDone    sync.WaitGroup // the log writer
	logsWritten map[string]string
}

// Replica is one inventory process.
type Replica struct {
	// Instance is its INVENTORY_INSTANCE, e.g. "inventory-1"; every response
	// it sends carries it in X-Instance.
	Instance string
	// Addr is host:port it listens on; URL is "http://" + Addr.
	Addr string
	URL  string

	// PostgresLink and RedisLink are the replica's own links to Postgres
	// and Redis when Options.NetLinks is set (else nil): add latency to
	// them, or cut them, to fault this replica's network alone.
	PostgresLink, RedisLink *netproxy.Proxy

	bin  string            // the binary, to start it again after a kill
	env  map[string]string // its INVENTORY_* settings
	mu   sync.Mutex
	proc *localstack.Process // replaced by Restart
}

// SentinelMaster is the master name the fleet's Sentinel watches Redis
// under (INVENTORY_REDIS_MASTER), with Options.RedisSentinel.
const SentinelMaster = "inventory"

// ErrNotReady is returned (wrapped, with the replica's log tail) when a
// replica exits or does not become ready in time.
var ErrNotReady = errors.New("replica not ready")

// Start builds the binary if needed and starts Postgres, Redis, the replicas
// and nginx. On any failure it stops what it had started and returns an
// error that includes the failing process's last output. ctx bounds the
// start only; the processes run until Stop (or until this process dies:
// each child has a parent-death signal).
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if opts.Replicas == 0 {
		opts.Replicas = 2
	}
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("start fleet: %d replicas", opts.Replicas)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	opts.PostgresHA = opts.PostgresHA || opts.PostgresAsync
	f := &Fleet{AdminToken: opts.AdminToken, logDir: opts.LogDir}
	defer func() {
		if err != nil {
			_ = f.Stop()
		}
	}()
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if f.logDir != "" {
		if err := os.MkdirAll(f.logDir, 0o755); err != nil {
			return nil, fmt.Errorf("start fleet: log directory: %w", err)
		}
	}
	if f.AdminToken == "" {
		f.AdminToken = randomToken()
	}

	// One apt-get for everything missing, before anything slow starts.
	servers := []string{"initdb", "postgres", "redis-server", "nginx"}
	var lockBackends []backend.Descriptor // those with servers of their own
	if !opts.NoLockServices {
		for _, d := range backends.All() {
			if d.Server != nil {
				lockBackends = append(lockBackends, d)
				servers = append(servers, d.Server.Needs...)
			}
		}
	}
	if opts.PostgresHA {
		servers = append(servers, "etcd", "patroni")
	}
	slices.Sort(servers)
	servers = slices.Compact(servers)
	progress("checking for " + strings.Join(servers, ", ") + " (apt-get installs what is missing)")
	if _, err := localstack.Ensure(ctx, servers...); err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	bin := opts.Binary
	if bin == "" {
		if f.tmpDir, err = os.MkdirTemp("", "inventory-fleet-"); err != nil {
			return nil, fmt.Errorf("start fleet: %w", err)
		}
		bin = filepath.Join(f.tmpDir, "inventory")
		progress("building the service (go build ./cmd/inventory: a minute or two the first time; after that mostly the link)")
		if err := build(ctx, bin, progress); err != nil {
			return nil, err
		}
	}

	// The servers start in parallel: initdb is the slow part.
	if len(lockBackends) == 0 {
		progress("starting Postgres and Redis")
	} else {
		names := make([]string, len(lockBackends))
		for i, d := range lockBackends {
			names[i] = d.Name
		}
		progress("starting Postgres, Redis and the servers of the lock backends " + strings.Join(names, ", "))
	}
	var pgErr, rdErr, lockErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if opts.PostgresHA {
			pgErr = f.startPatroni(ctx, opts.PostgresAsync)
			return
		}
		f.Postgres, pgErr = localstack.StartPostgres(ctx, localstack.PostgresOptions{NoFsync: opts.NoFsync})
	})
	wg.Go(func() {
		f.Redis, rdErr = localstack.StartRedisWith(ctx, localstack.RedisOptions{FakeClock: opts.FakeClock})
	})
	if len(lockBackends) > 0 {
		// Durable: the fleet's servers flush, as in production.
		wg.Go(func() {
			lockErr = f.startLockServers(ctx, lockBackends, backend.ServerOptions{Durable: true, FakeClock: opts.FakeClock})
		})
	}
	wg.Wait()
	if err := errors.Join(pgErr, rdErr, lockErr); err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	f.RedisURL = f.Redis.URL
	if f.Postgres != nil {
		f.PostgresURL = f.Postgres.URL
	}
	if opts.RedisReplica || opts.RedisSentinel {
		if f.RedisReplica, err = localstack.StartRedis(ctx); err != nil {
			return nil, fmt.Errorf("start fleet: %w", err)
		}
		if opts.RedisSentinel {
			if err := localstack.QuickSyncs(ctx, f.Redis, f.RedisReplica); err != nil {
				return nil, fmt.Errorf("start fleet: %w", err)
			}
		}
		if err := f.RedisReplica.ReplicaOf(ctx, f.Redis.Addr); err != nil {
			return nil, fmt.Errorf("start fleet: %w", err)
		}
	}
	if opts.RedisSentinel {
		if err := f.startSentinel(ctx); err != nil {
			return nil, fmt.Errorf("start fleet: %w", err)
		}
	}
	if opts.RedisCluster {
		progress("starting a Redis Cluster (3 masters, a replica each)")
		if f.RedisCluster, err = localstack.StartRedisCluster(ctx, localstack.RedisClusterOptions{}); err != nil {
			return nil, fmt.Errorf("start fleet: %w", err)
		}
	}

	progress(fmt.Sprintf("starting %d replicas (migrations first)", opts.Replicas))
	for i := range opts.Replicas {
		r, err := f.newReplica(fmt.Sprintf("inventory-%d", i+1), bin, opts.Env, opts.NetLinks)
		if err != nil {
			return nil, err
		}
		f.Replicas = append(f.Replicas, r)
	}
	errs := make([]error, len(f.Replicas))
	for i, r := range f.Replicas { // migrations run concurrently, as in compose
		wg.Go(func() { errs[i] = r.serveOnFreePort(ctx, opts.ReadyTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}

	progress("starting nginx")
	limits := opts.Limits
	switch {
	case opts.NoLimits:
		limits = nginx.Limits{}
	case limits == nginx.Limits{}:
		limits = nginx.DefaultLimits
	}
	if f.Nginx, err = f.startNginx(ctx, opts.Listen, limits); err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	f.URL = "http://" + f.Nginx.Addr
	if err := waitReady(ctx, client.New(f.URL, client.Options{HTTPClient: probeClient}), 15*time.Second); err != nil {
		return nil, fmt.Errorf("start fleet: nginx at %s does not reach the replicas: %w\n%s", f.URL, err, tail(f.Nginx.Logs(), 2000))
	}
	if f.logDir != "" {
		f.writeLogs()
		f.logsStop = make(chan struct{})
		f.logsDone.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-f.logsStop:
					return
				case <-t.C:
					f.writeLogs()
				}
			}
		})
	}
	return f, nil
}

// logs returns every process of the fleet by the name of its log file.
// Not safe to call while Start is starting them or SwapRedis swaps them.
func (f *Fleet) logs() map[string]func() string {
	m := map[string]func() string{}
	for _, r := range f.Replicas {
		m[r.Instance+".log"] = r.Logs
	}
	if f.Nginx != nil {
		m["nginx.log"] = f.Nginx.Logs
	}
	if f.Postgres != nil {
		m["postgres.log"] = f.Postgres.Logs
	}
	if f.Patroni != nil {
		for _, pm := range f.Patroni.Members {
			m["patroni-"+pm.Name+".log"] = pm.Logs
		}
	}
	if f.Redis != nil {
		m["redis.log"] = f.Redis.Logs
	}
	if f.RedisReplica != nil {
		m["redis-replica.log"] = f.RedisReplica.Logs
	}
	if f.Sentinel != nil {
		m["sentinel.log"] = f.Sentinel.Logs
	}
	for _, s := range f.LockServers {
		maps.Copy(m, s.Logs())
	}
	if f.Etcd != nil {
		m["patroni-etcd.log"] = f.Etcd.Logs
	}
	return m
}

// writeLogs writes each process's kept output to its file under the log
// directory, where it changed since the last time. The output is a tail
// (see localstack.LogBuffer), so each file is rewritten, not appended to.
// Errors are dropped: a log file must never stop the fleet.
func (f *Fleet) writeLogs() {
	if f.logsWritten == nil {
		f.logsWritten = map[string]string{}
	}
	for name, logs := range f.logs() {
		out := logs()
		if prev, ok := f.logsWritten[name]; ok && prev == out {
			continue
		}
		if err := os.WriteFile(filepath.Join(f.logDir, name), []byte(out), 0o644); err == nil {
			f.logsWritten[name] = out
		}
	}
}

// startLockServers starts the servers of every backend of list (each has
// a Server) by its Descriptor, side by side, with o, and keeps them
// (LockServers, and the Redis servers among them in RedlockServers).
// What did start is kept even when another failed, for Stop.
func (f *Fleet) startLockServers(ctx context.Context, list []backend.Descriptor, o backend.ServerOptions) error {
	started := make([]backend.Servers, len(list))
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, d := range list {
		wg.Go(func() {
			if started[i], errs[i] = d.Server.Start(ctx, o); errs[i] != nil {
				errs[i] = fmt.Errorf("the servers of lock backend %s: %w", d.Name, errs[i])
			}
		})
	}
	wg.Wait()
	f.LockServers = map[string]backend.Servers{}
	for i, d := range list {
		if started[i] == nil {
			continue
		}
		f.LockServers[d.Setting] = started[i]
		// The faults that restart a Redis or move its clock look for Redis
		// servers, whichever backend's they are.
		if r, ok := started[i].(interface{ RedisServers() []*localstack.Redis }); ok {
			f.RedlockServers = append(f.RedlockServers, r.RedisServers()...)
		}
	}
	return errors.Join(errs...)
}

// startPatroni starts an etcd for Patroni, then Postgres under Patroni
// with that etcd as its DCS.
func (f *Fleet) startPatroni(ctx context.Context, async bool) (err error) {
	if f.Etcd, err = localstack.StartEtcd(ctx); err != nil {
		return err
	}
	if f.Patroni, err = localstack.StartPatroni(ctx, localstack.PatroniOptions{Etcd: f.Etcd.Endpoint, Async: async}); err != nil {
		return err
	}
	f.PostgresURL = f.Patroni.URL
	return nil
}

// startSentinel starts the Sentinel once the Redis replica has synced, and
// waits until the Sentinel has found the replica and could promote it: the
// first failover must not find the Sentinel still discovering it.
func (f *Fleet) startSentinel(ctx context.Context) (err error) {
	const wait = 15 * time.Second
	if err := localstack.WaitReplicating(ctx, f.RedisReplica.Addr, f.Redis.Addr, wait); err != nil {
		return err
	}
	if f.Sentinel, err = localstack.StartSentinel(ctx, SentinelMaster, f.Redis.Addr); err != nil {
		return err
	}
	return f.Sentinel.WaitReplica(ctx, f.RedisReplica.Addr, wait)
}

// LockSettings are the replicas' settings of the lock backends whose
// servers the fleet started (INVENTORY_ETCD_ENDPOINTS: …), each the value
// its servers give (LockServers): where those backends keep their locks.
// A new map at each call.
func (f *Fleet) LockSettings() map[string]string {
	env := map[string]string{}
	for setting, s := range f.LockServers {
		env[setting] = s.Setting()
	}
	return env
}

// Build compiles ./cmd/inventory of the module found from the current
// directory into out. It needs the go command and the module's source.
func Build(ctx context.Context, out string) error { return build(ctx, out, nil) }

// build is Build telling progress, if not nil, every few seconds how many
// packages it has compiled (go build -v names each package it compiles;
// cached ones are not named, so a warm build says nothing).
func build(ctx context.Context, out string, progress func(string)) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build inventory: the go command is not on PATH (install Go, or pass Options.Binary): %w", err)
	}
	modCmd := exec.CommandContext(ctx, gobin, "env", "GOMOD")
	mod, err := modCmd.Output()
	gomod := strings.TrimSpace(string(mod))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return fmt.Errorf("build inventory: run from inside the inventory module, or pass Options.Binary (go env GOMOD = %q, %v)", gomod, err)
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-v", "-o", out, "./cmd/inventory")
	cmd.Dir = filepath.Dir(gomod)
	var output localstack.LogBuffer
	cmd.Stdout = &output
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	var packages atomic.Int64
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") && !strings.ContainsAny(line, " \t:") {
				packages.Add(1) // a package path, as -v prints it
			}
			_, _ = output.Write([]byte(line + "\n"))
		}
		_, _ = io.Copy(io.Discard, pr)
	})
	start := time.Now()
	done := make(chan struct{})
	if progress != nil {
		readers.Go(func() {
			t := time.NewTicker(5 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					progress(fmt.Sprintf("building … %s so far (packages compiled: %d; the link comes last)", time.Since(start).Round(time.Second), packages.Load()))
				}
			}
		})
	}
	err = cmd.Run()
	_ = pw.Close()
	close(done)
	readers.Wait()
	if err != nil {
		return fmt.Errorf("build inventory in %s: %w\n%s", cmd.Dir, err, tail(output.String(), 3000))
	}
	if progress != nil {
		progress(fmt.Sprintf("built in %s (packages compiled: %d, the others from the Go cache)", time.Since(start).Round(time.Second), packages.Load()))
	}
	return nil
}

// newReplica is the fleet's replica named instance, with its settings and
// its network links, not launched yet (see serveOnFreePort).
func (f *Fleet) newReplica(instance, bin string, extra map[string]string, netLinks bool) (*Replica, error) {
	var err error
	r := &Replica{Instance: instance, bin: bin}
	pgURL, redisURL := f.PostgresURL, f.RedisURL
	if netLinks && f.Postgres != nil { // under Patroni, a link would go to one member
		pgAddr := fmt.Sprintf("127.0.0.1:%d", f.Postgres.Port)
		if r.PostgresLink, err = netproxy.Start(instance+"-postgres", pgAddr); err != nil {
			return nil, err
		}
		f.links = append(f.links, r.PostgresLink)
		pgURL = strings.Replace(pgURL, pgAddr, r.PostgresLink.Addr, 1)
	}
	if netLinks && f.Sentinel == nil { // through a Sentinel, a link would be bypassed
		if r.RedisLink, err = netproxy.Start(instance+"-redis", f.Redis.Addr); err != nil {
			return nil, err
		}
		f.links = append(f.links, r.RedisLink)
		redisURL = strings.Replace(redisURL, f.Redis.Addr, r.RedisLink.Addr, 1)
	}
	env := f.LockSettings()
	env["INVENTORY_POSTGRES_URL"] = pgURL
	env["INVENTORY_REDIS_URL"] = redisURL
	if f.Sentinel != nil {
		// The URL still gives the database; the primary comes from the Sentinel.
		env["INVENTORY_REDIS_SENTINELS"] = f.Sentinel.Addr
		env["INVENTORY_REDIS_MASTER"] = f.Sentinel.Master
	}
	if f.RedisCluster != nil {
		env["INVENTORY_REDIS_CLUSTER"] = strings.Join(f.RedisCluster.Seeds(), ",")
	}
	env["INVENTORY_ADMIN_TOKEN"] = f.AdminToken
	for k, v := range extra {
		env[k] = v
	}
	env["INVENTORY_INSTANCE"] = instance
	r.env = env
	return r, nil
}

// freePort is localstack.FreePort, replaced in tests to hand out a taken
// port.
var freePort = localstack.FreePort

// serveOnFreePort starts the replica on a free port and waits up to
// timeout until it is ready; on a fresh port again when another process
// bound its port first (localstack.OnFreePorts). Start calls it before
// anything else reads the replica's address.
func (r *Replica) serveOnFreePort(ctx context.Context, timeout time.Duration) error {
	return localstack.OnFreePorts(func() error {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("start %s: %w", r.Instance, err)
		}
		r.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		r.URL = "http://" + r.Addr
		r.env["INVENTORY_ADDR"] = r.Addr
		if err := r.launch(); err != nil {
			return err
		}
		return r.WaitReady(ctx, timeout)
	})
}

// launch starts the replica's process on its address.
func (r *Replica) launch() error {
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = childEnv(os.Environ(), r.env)
	// SIGTERM: the service drains in-flight sales and exits 0.
	proc, err := localstack.StartProcess(r.Instance, cmd, syscall.SIGTERM)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, r.bin)
	}
	r.mu.Lock()
	r.proc = proc
	r.mu.Unlock()
	return nil
}

// process is the replica's current process.
func (r *Replica) process() *localstack.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Kill ends the replica with SIGKILL, as a crash would: no draining, no
// release of what it holds. It returns once the process is gone.
func (r *Replica) Kill() error {
	p := r.process()
	if err := p.Signal(syscall.SIGKILL); err != nil && !p.Exited() {
		return fmt.Errorf("kill %s: %w", r.Instance, err)
	}
	<-p.Done()
	return nil
}

// Restart starts the replica again on the same address with the same
// settings, after it has exited (see Kill), and waits until it is ready.
func (r *Replica) Restart(ctx context.Context, timeout time.Duration) error {
	if !r.process().Exited() {
		return fmt.Errorf("restart %s: it is still running (Kill it first)", r.Instance)
	}
	if err := r.launch(); err != nil {
		return fmt.Errorf("restart %s: %w", r.Instance, err)
	}
	return r.WaitReady(ctx, timeout)
}

// childEnv is the parent's environment without any INVENTORY_* variable
// (a stray one in the caller's shell must not change the fleet), plus set.
func childEnv(parent []string, set map[string]string) []string {
	var env []string
	for _, kv := range parent {
		if !strings.HasPrefix(kv, "INVENTORY_") {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// startNginx starts nginx in front of the replicas on listen, or, when
// listen is empty, on a free port (a fresh one again when another process
// bound it first).
func (f *Fleet) startNginx(ctx context.Context, listen string, limits nginx.Limits) (*localstack.Nginx, error) {
	if listen != "" {
		return f.startNginxOn(ctx, listen, limits)
	}
	var n *localstack.Nginx
	err := localstack.OnFreePorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		n, err = f.startNginxOn(ctx, fmt.Sprintf("127.0.0.1:%d", port), limits)
		return err
	})
	return n, err
}

func (f *Fleet) startNginxOn(ctx context.Context, listen string, limits nginx.Limits) (*localstack.Nginx, error) {
	var addrs []string
	for _, r := range f.Replicas {
		addrs = append(addrs, r.Addr)
	}
	files, err := nginx.LocalFiles(listen, addrs)
	if err != nil {
		return nil, err
	}
	if files, err = nginx.WithLimits(files, limits); err != nil {
		return nil, err
	}
	return localstack.StartNginx(ctx, listen, files)
}

// SwapRedis makes RedisReplica the Redis the fleet calls its own (after a
// failover promoted it and the replicas follow it), and the former
// primary its replica. Not safe to call while something else reads
// the fleet's Redis fields.
func (f *Fleet) SwapRedis() {
	f.Redis, f.RedisReplica = f.RedisReplica, f.Redis
	f.RedisURL = f.Redis.URL
}

// Pid is the replica's process id, e.g. for SIGSTOP in fault tests.
func (r *Replica) Pid() int { return r.process().Pid() }

// Logs returns the tail of what the replica's current process wrote to
// stdout and stderr.
func (r *Replica) Logs() string { return r.process().Logs() }

// Exited reports whether the replica process has ended.
func (r *Replica) Exited() bool { return r.process().Exited() }

// Client is a client of the fleet's API through nginx, with the fleet's
// admin token. It sends through http.DefaultTransport, so a test that
// wraps that (spectest) checks its exchanges too, and gives each call 30 s.
func (f *Fleet) Client() *client.Client {
	return client.New(f.URL, client.Options{AdminToken: f.AdminToken, HTTPClient: callClient})
}

// Client is Fleet.Client for this replica alone, past nginx.
func (r *Replica) Client() *client.Client {
	return client.New(r.URL, client.Options{AdminToken: r.env["INVENTORY_ADMIN_TOKEN"], HTTPClient: callClient})
}

var (
	callClient  = &http.Client{Timeout: 30 * time.Second}
	probeClient = &http.Client{Timeout: 2 * time.Second}
)

// WaitReady waits up to timeout until the replica answers 200 on /readyz
// (it reaches Postgres and Redis); it fails at once if the process exits.
func (r *Replica) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	probe := client.New(r.URL, client.Options{HTTPClient: probeClient})
	p := r.process()
	delay := 10 * time.Millisecond
	var last error
	for {
		_, last = probe.Readyz(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited (%v): %w: %v\n%s", r.Instance, p.Err(), ErrNotReady, last, tail(r.Logs(), 3000))
		case <-ctx.Done():
			return fmt.Errorf("%s: %w within %v: %v\n%s", r.Instance, ErrNotReady, timeout, last, tail(r.Logs(), 3000))
		case <-time.After(delay):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// stop sends SIGTERM (the service drains and exits 0) and kills the replica
// if it has not exited after grace. It reports a non-zero exit.
func (r *Replica) stop(grace time.Duration) error {
	p := r.process()
	if p == nil { // Start failed before launching it
		return nil
	}
	if err := p.Stop(grace); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(r.Logs(), 2000))
	}
	var exit *exec.ExitError
	if errors.As(p.Err(), &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() != syscall.SIGTERM {
			return nil // it was already gone, e.g. SIGKILLed by a fault test
		}
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("%s exited with %v after SIGTERM\n%s", r.Instance, err, tail(r.Logs(), 2000))
	}
	return nil
}

// Stop ends every process in dependency order (replicas, which drain, then
// nginx, Redis and Postgres) and removes the temporary files. It is safe to
// call more than once; later calls return nil. The error reports replicas
// that did not exit cleanly.
func (f *Fleet) Stop() error {
	var errs []error
	f.stopOnce.Do(func() {
		if f.logsStop != nil {
			close(f.logsStop)
			f.logsDone.Wait()
		}
		var wg sync.WaitGroup
		rerrs := make([]error, len(f.Replicas))
		for i, r := range f.Replicas {
			wg.Go(func() { rerrs[i] = r.stop(15 * time.Second) })
		}
		wg.Wait()
		errs = append(errs, rerrs...)
		if f.Nginx != nil {
			_ = f.Nginx.Stop()
		}
		for _, l := range f.links {
			l.Stop()
		}
		if f.Sentinel != nil {
			_ = f.Sentinel.Stop()
		}
		if f.Redis != nil {
			_ = f.Redis.Stop()
		}
		if f.RedisReplica != nil {
			_ = f.RedisReplica.Stop()
		}
		if f.RedisCluster != nil {
			_ = f.RedisCluster.Stop()
		}
		for _, s := range f.LockServers {
			_ = s.Stop()
		}
		if f.Patroni != nil { // before its DCS
			_ = f.Patroni.Stop()
		}
		if f.Etcd != nil {
			_ = f.Etcd.Stop()
		}
		if f.Postgres != nil {
			_ = f.Postgres.Stop()
		}
		if f.logDir != "" {
			f.writeLogs() // what the processes said as they stopped
		}
		if f.tmpDir != "" {
			errs = append(errs, os.RemoveAll(f.tmpDir))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop fleet: %w", err)
	}
	return nil
}

// waitReady waits up to timeout until c answers 200 on /readyz.
func waitReady(ctx context.Context, c *client.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := c.Readyz(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
