package productcache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/postgres"
	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// backends is one test's Postgres (migrated, with a Store on it) and Redis.
type backends struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	redis string // URL
}

// newBackends gives the test a fresh database and the flushed shared
// Redis, and checks at its end that it left no goroutine behind (start a
// shared server the test needs besides, a Redis Cluster, before it).
func newBackends(t testing.TB) *backends {
	t.Helper()
	// The servers first: the binary shares them, so their goroutines
	// outlive the test.
	pgURL, redisURL := testenv.PostgresURL(t), testenv.RedisURL(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testenv.NoLeaks(t, ignore) })
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	_ = db.Close()
	return &backends{pool: pool, store: postgres.NewStore(pool, postgres.Limits{}), redis: redisURL}
}

// client opens a Redis client on url, closed when the test ends: one per
// replica, as each replica has its own.
func client(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// exec runs sql on the test's database.
func (b *backends) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// product creates product id with quantity units, in round 1.
func (b *backends) product(t testing.TB, id string, quantity int64) {
	t.Helper()
	b.exec(t, `INSERT INTO stock (product_id, name, quantity, initial) VALUES ($1, 'test', $2, $2)`, id, quantity)
}

// loads counts the reads of Postgres a Loader makes.
type loads struct {
	n    atomic.Int64
	load Loader
}

func (l *loads) Load(ctx context.Context, id string) (inventory.Product, error) {
	l.n.Add(1)
	return l.load(ctx, id)
}

// replica is one replica's cache: a Redis client, a refresh locker and a
// Cache of its own, all on the test's backends, its Postgres reads counted
// in reads (which replicas may share).
type replica struct {
	*Cache
	rdb redis.UniversalClient
	obs *recorder
}

func (b *backends) replica(t testing.TB, reads *loads, opts Options) *replica {
	t.Helper()
	return replicaOn(t, client(t, b.redis), reads, opts)
}

// replicaOn is a replica on rdb (a private server, a cluster).
func replicaOn(t testing.TB, rdb redis.UniversalClient, reads *loads, opts Options) *replica {
	t.Helper()
	if opts.Locker == nil && opts.Mode != NoLock && opts.Mode != Off {
		ttl := opts.TTL
		if ttl == 0 {
			ttl = time.Second
		}
		m := redislock.NewMutex(rdb, redislock.Options{Options: lock.Options{TTL: ttl}})
		t.Cleanup(m.Close)
		opts.Locker = m
	}
	obs := &recorder{answers: map[Source]int{}, fallbacks: map[string]int{}, locks: map[string]int{}}
	opts.Observer = obs
	c, err := New(rdb, reads.Load, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &replica{Cache: c, rdb: rdb, obs: obs}
}

// recorder is an Observer that counts what it saw.
type recorder struct {
	mu        sync.Mutex
	answers   map[Source]int
	fallbacks map[string]int
	locks     map[string]int
	waits     []bool // filled or not, in order
}

func (r *recorder) Answered(s Source) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[s]++
}

func (r *recorder) FellBack(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fallbacks[reason]++
}

func (r *recorder) Waited(_ time.Duration, filled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, filled)
}

func (r *recorder) Locked(result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.locks[result]++
}

func (r *recorder) answered(s Source) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[s]
}

func (r *recorder) fellBack(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fallbacks[reason]
}

func (r *recorder) waited() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.waits...)
}
