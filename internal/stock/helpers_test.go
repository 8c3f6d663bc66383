package stock

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/pglock"
	"inventory/internal/lock/redislock"
	"inventory/internal/postgres"
	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's Postgres database (migrated) and the shared Redis
// (flushed), with a store and client for the test's own checks.
type env struct {
	pgURL, redisURL string
	// cluster, when set, are the seed nodes of the Redis Cluster the env
	// uses instead of redisURL (newClusterEnv).
	cluster []string
	store   *postgres.Store
	pool    *pgxpool.Pool
	rdb     redis.UniversalClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, &env{redisURL: testenv.RedisURL(t)})
}

// newOwnEnv is newEnv on a Redis server of the test's own, for the tests
// that run in parallel (t.Parallel): the binary's shared Redis is flushed
// by every test that starts with newEnv. Such a test also sells product ids
// no other parallel test sells, since etcd, ZooKeeper and the Redlock
// servers are shared and hold their keys by product id.
func newOwnEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, &env{redisURL: testenv.RedisServer(t).URL})
}

// newClusterEnv is newEnv on the binary's Redis Cluster (flushed): every
// Redis client the env makes is a cluster client.
func newClusterEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, &env{cluster: testenv.RedisCluster(t)})
}

func newEnvOn(t *testing.T, e *env) *env {
	t.Helper()
	e.pgURL = testenv.PostgresURL(t)
	e.pool = newPool(t, e.pgURL)
	db := stdlib.OpenDBFromPool(e.pool)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	e.store = postgres.NewStore(e.pool, postgres.Limits{})
	e.rdb = e.newRedis(t)
	return e
}

// newRedis is a new client of the env's Redis, a cluster client on a
// cluster, closed when the test ends.
func (e *env) newRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	if e.cluster == nil {
		return newRedis(t, e.redisURL)
	}
	c := testenv.ClusterClient(e.cluster)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("pgxpool.ParseConfig(%s): %v", url, err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgxpool.New(%s): %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newRedis(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis.ParseURL(%s): %v", url, err)
	}
	opts.PoolSize = 64
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testLock is lock options that keep the tests quick: a shorter top backoff
// than the default 32ms means fewer idle gaps between one holder's release
// and the next waiter's try, on a lock 64 goroutines queue for.
var testLock = redislock.Options{Options: lock.Options{TTL: 5 * time.Second, Wait: 10 * time.Second}, MaxBackoff: 8 * time.Millisecond}

// replica builds strategy name as one replica would: its own Postgres pool
// and Redis client, its own instance name.
func (e *env) replica(t *testing.T, name, instance string, workDelay time.Duration) inventory.Seller {
	t.Helper()
	return e.replicaWith(t, name, instance, testLock, workDelay)
}

// replicaWith is replica with lock options of the test's own.
func (e *env) replicaWith(t *testing.T, name, instance string, opts redislock.Options, workDelay time.Duration) inventory.Seller {
	t.Helper()
	return e.seller(t, name, testDeps{Deps: Deps{
		Store:     postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{}),
		Redis:     e.newRedis(t),
		Instance:  instance,
		WorkDelay: workDelay,
	}, Lock: opts})
}

// testDeps is what a test builds a seller from: Deps, and the options of
// the lockers that build gives it.
type testDeps struct {
	Deps
	Lock redislock.Options
}

// build is d's Deps with a locker, built from d.Lock on d's Redis client
// and Postgres pool as cmd/inventory builds them, for every strategy in
// Redis or Postgres that d.Lockers lacks, and with d.Lock's Wait and
// backoff for the strategies that retry.
func (d testDeps) build(t *testing.T) Deps {
	t.Helper()
	out := d.Deps
	out.Lockers = maps.Clone(d.Lockers)
	if out.Lockers == nil {
		out.Lockers = map[string]lock.Locker{}
	}
	add := func(name string, lk lock.Locker) {
		if out.Lockers[name] == nil {
			out.Lockers[name] = lk
		}
	}
	redisOpts := func(counter string, watchdog bool) redislock.Options {
		o := d.Lock
		o.Watchdog, o.FenceFloor = watchdog, d.Store.FenceFloor(counter)
		return o
	}
	mutex := redislock.NewMutex(d.Redis, redisOpts(redislock.Backend, false))
	handoff := redislock.NewMutex(d.Redis, redisOpts(redislock.Backend, false))
	reentrant := redislock.NewReentrant(d.Redis, redisOpts(redislock.Backend, true))
	fair := redislock.NewFair(d.Redis, redisOpts(redislock.FairBackend, true))
	for _, c := range []func(){mutex.Close, handoff.Close, reentrant.Close, fair.Close} {
		t.Cleanup(c)
	}
	add(inventory.SetNX, redislock.NewSetNX(d.Redis, d.Lock).Locker())
	add(inventory.RedisLock, mutex)
	add(inventory.Handoff, handoff)
	add(inventory.Reentrant, reentrant)
	add(inventory.Fair, fair)
	add(inventory.PgLock, pglock.New(d.Store.Pool(), pglock.Options{Options: d.Lock.Options, MinBackoff: d.Lock.MinBackoff, MaxBackoff: d.Lock.MaxBackoff}))
	if out.Wait == 0 {
		out.Wait = d.Lock.Wait
	}
	if out.MinBackoff == 0 && out.MaxBackoff == 0 {
		out.MinBackoff, out.MaxBackoff = d.Lock.MinBackoff, d.Lock.MaxBackoff
	}
	return out
}

// backends fill in the lockers of the strategies that need a lock service
// of their own (Info.Needs), each registered by its strategy's test file.
// e.seller calls every one for every seller it builds, so that each
// seller has clients of its own, as a replica would.
var backends []func(t *testing.T, d *testDeps)

func (e *env) seller(t *testing.T, name string, d testDeps) inventory.Seller {
	t.Helper()
	d.Lockers = maps.Clone(d.Lockers)
	if d.Lockers == nil {
		d.Lockers = map[string]lock.Locker{}
	}
	for _, fill := range backends {
		fill(t, &d)
	}
	s, err := New(name, d.build(t))
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return s
}

// deps is testDeps on the env's own store and client.
func (e *env) deps(instance string) testDeps {
	return testDeps{Deps: Deps{Store: e.store, Redis: e.rdb, Instance: instance}, Lock: testLock}
}

func (e *env) restock(t *testing.T, id string, q int64) {
	t.Helper()
	if _, err := Restock(context.Background(), e.store, e.rdb, id, "", q); err != nil {
		t.Fatalf("Restock(%q, %d): %v", id, q, err)
	}
}

func (e *env) product(t *testing.T, id string) inventory.Product {
	t.Helper()
	p, err := e.store.Product(context.Background(), id)
	if err != nil {
		t.Fatalf("Product(%q): %v", id, err)
	}
	return p
}

// checkLedger fails unless initial - quantity equals the units in the ledger,
// the invariant every strategy keeps, oversold or not.
func (e *env) checkLedger(t *testing.T, id string) inventory.Product {
	t.Helper()
	p := e.product(t, id)
	if p.Initial-p.Quantity != p.Sold {
		t.Errorf("%q: initial %d - quantity %d = %d, ledger says %d units sold (%d sales)",
			id, p.Initial, p.Quantity, p.Initial-p.Quantity, p.Sold, p.Sales)
	}
	return p
}

func (e *env) redisKeys(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	c, ok := e.rdb.(*redis.ClusterClient)
	if !ok {
		keys, err := e.rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatalf("KEYS *: %v", err)
		}
		return keys
	}
	var (
		mu   sync.Mutex
		keys []string
	)
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		some, err := m.Keys(ctx, "*").Result()
		mu.Lock()
		keys = append(keys, some...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("KEYS * on every master: %v", err)
	}
	return keys
}
