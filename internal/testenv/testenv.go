// Package testenv gives integration tests real Postgres and Redis servers:
// from INVENTORY_TEST_POSTGRES_URL / INVENTORY_TEST_REDIS_URL when set, else
// containers when a Docker engine answers, else throw-away local processes
// (see localstack). The lock backends' servers come the same way, from
// INVENTORY_TEST_* (ServerEnv) or started by the backend's own
// Descriptor.Server (LockServer). It never skips: when no server can be
// had, the test fails and says how to provide one.
//
// A test binary shares one server of each kind; call Main from TestMain so
// they are stopped at the end. Each PostgresURL call gets a fresh database.
// `make test` starts one Postgres and the shared servers of the lock
// backends (etcd, ZooKeeper) for all the test binaries (StartShared,
// through ./internal/testenv/cmd/testservers) and names them in these
// variables; each binary still starts its own Redis.
package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"inventory/internal/localstack"
)

// Environment variables that point the tests at servers you already run.
const (
	PostgresEnv = "INVENTORY_TEST_POSTGRES_URL"
	RedisEnv    = "INVENTORY_TEST_REDIS_URL"
)

const howToProvide = "set " + PostgresEnv + " and " + RedisEnv + " to servers you run, start a Docker engine, or install postgresql and redis-server (apt-get install -y postgresql redis-server)"

var (
	mu       sync.Mutex
	stops    []func()
	dbSerial atomic.Int64

	// pgServer's value is the URL of the server's maintenance database.
	pgServer    = &server{env: PostgresEnv, what: "Postgres", hint: howToProvide, start: startPostgres}
	redisServer = &server{env: RedisEnv, what: "Redis", hint: howToProvide, start: startRedis}
)

// Main runs the tests and then stops the servers this binary started.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with more to check after the
// tests: it runs them, stops the servers and returns m.Run's exit code.
func Run(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	mu.Unlock()
	return code
}

func onExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	stops = append(stops, f)
}

// PostgresURL returns the URL of a new, empty database for this test.
func PostgresURL(t testing.TB) string {
	t.Helper()
	pgBase := pgServer.get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), dbSerial.Add(1))
	conn, err := pgx.Connect(ctx, pgBase)
	if err != nil {
		t.Fatalf("connect to test Postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	u, _ := url.Parse(pgBase)
	u.Path = "/" + name
	return u.String()
}

// RedisURL returns the URL of the binary's Redis, flushed for this test.
// Tests that share it must not run in parallel with each other (nor may
// test binaries: see shared).
func RedisURL(t testing.TB) string {
	t.Helper()
	rdURL := redisServer.get(t)
	opts, err := redis.ParseURL(rdURL)
	if err != nil {
		t.Fatalf("parse %s: %v", RedisEnv, err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatalf("flush test Redis: %v", err)
	}
	return rdURL
}

// RedisServer starts a private redis-server process for this test, for
// tests that restart it; it is stopped when the test ends.
func RedisServer(t testing.TB) *localstack.Redis {
	t.Helper()
	r, err := localstack.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("start a private redis-server: %v\n(install it: apt-get install -y redis-server)", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

func startPostgres(ctx context.Context) (string, func(), error) {
	if dockerAnswers(ctx) {
		c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
			tcpostgres.WithDatabase("inventory"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
			tcpostgres.BasicWaitStrategies())
		if err != nil {
			return "", nil, fmt.Errorf("postgres container: %w", err)
		}
		stop := func() { _ = testcontainers.TerminateContainer(c) }
		u, err := c.ConnectionString(ctx, "sslmode=disable")
		if err != nil {
			stop()
			return "", nil, err
		}
		return u, stop, nil
	}
	// Room for the pools of the test binaries that share it (go test runs
	// GOMAXPROCS of them at once), each of which had 300 to itself.
	pg, err := localstack.StartPostgres(ctx, localstack.PostgresOptions{NoFsync: true, MaxConnections: 1000, Dir: memoryDir()})
	if err != nil {
		return "", nil, err
	}
	return strings.Replace(pg.URL, "/inventory?", "/postgres?", 1), func() { _ = pg.Stop() }, nil
}

func startRedis(ctx context.Context) (string, func(), error) {
	if dockerAnswers(ctx) {
		c, err := tcredis.Run(ctx, "redis:7-alpine")
		if err != nil {
			return "", nil, fmt.Errorf("redis container: %w", err)
		}
		stop := func() { _ = testcontainers.TerminateContainer(c) }
		u, err := c.ConnectionString(ctx)
		if err != nil {
			stop()
			return "", nil, err
		}
		return u, stop, nil
	}
	r, err := localstack.StartRedis(ctx)
	if err != nil {
		return "", nil, err
	}
	return r.URL, func() { _ = r.Stop() }, nil
}

// dockerAnswers reports whether a Docker engine is reachable. The docker
// client alone is not enough: testcontainers needs the daemon.
func dockerAnswers(ctx context.Context) bool {
	if os.Getenv("INVENTORY_TEST_NO_DOCKER") != "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Health(ctx) == nil
}

// memoryDir is where the test Postgres keeps its files: /dev/shm when it is
// a tmpfs with room to spare, else "" (the temporary directory). Each test
// makes a database of its own, about 10 MB in 300 files that nobody needs
// after the run. On a disk, deleting 400 of them (3.8 GB, 121,000 files)
// took 25 s, and make test waited 14-17 s at its end for its own; in
// memory that is about a second.
func memoryDir() string {
	const tmpfsMagic = 0x01021994 // statfs(2)
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != tmpfsMagic || st.Bavail*uint64(st.Bsize) < 8<<30 {
		return ""
	}
	return "/dev/shm"
}
