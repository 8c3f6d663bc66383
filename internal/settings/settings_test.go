package settings

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var errUnknown = errors.New("unknown")

func known(name string) error {
	if name == "a" || name == "b" {
		return nil
	}
	return errUnknown
}

func client(t *testing.T) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// database returns the URL of a fresh, migrated database.
func database(t *testing.T) string {
	t.Helper()
	url := testenv.PostgresURL(t)
	pool := connect(t, url)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	return url
}

func connect(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func stored(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var v string
	if err := pool.QueryRow(context.Background(), `SELECT value FROM settings WHERE name = $1`, StrategySetting).Scan(&v); err != nil {
		t.Fatalf("read the settings row: %v", err)
	}
	return v
}

func fast() Options { return Options{Refresh: time.Millisecond} }

func TestInitDoesNotOverwriteAStoredDefault(t *testing.T) {
	ctx := context.Background()
	rdb, pool := client(t), connect(t, database(t))
	first, second := NewStrategy(rdb, pool, known, fast()), NewStrategy(rdb, pool, known, fast())
	if err := first.Init(ctx, "a"); err != nil {
		t.Fatalf("Init(a) = %v", err)
	}
	if err := second.Init(ctx, "b"); err != nil {
		t.Fatalf("Init(b) = %v", err)
	}
	if got, err := second.Get(ctx); got != "a" || err != nil {
		t.Errorf("Get after Init(a), Init(b) = %q, %v; want a, nil", got, err)
	}
	if got := stored(t, pool); got != "a" {
		t.Errorf("Postgres holds %q after Init(a), Init(b); want a", got)
	}
}

func TestInitAfterASwitchKeepsTheSwitchEvenWithRedisEmpty(t *testing.T) {
	ctx := context.Background()
	rdb, pool := client(t), connect(t, database(t))
	first := NewStrategy(rdb, pool, known, fast())
	if err := first.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := first.Set(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A replica starting (or restarting) now, configured with a.
	late := NewStrategy(rdb, pool, known, fast())
	if err := late.Init(ctx, "a"); err != nil {
		t.Fatalf("Init(a) after a switch to b and FLUSHALL = %v", err)
	}
	if got, err := late.Get(ctx); got != "b" || err != nil {
		t.Errorf("Get = %q, %v; want the switch b, nil", got, err)
	}
	if got := rdb.Get(ctx, StrategyKey).Val(); got != "b" {
		t.Errorf("Redis %s = %q after Init, want b (Redis made to agree with Postgres)", StrategyKey, got)
	}
}

func TestInitKeepsADefaultOnlyRedisHad(t *testing.T) {
	ctx := context.Background()
	rdb, pool := client(t), connect(t, database(t))
	if err := rdb.Set(ctx, StrategyKey, "b", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s := NewStrategy(rdb, pool, known, fast())
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, pool); got != "b" {
		t.Errorf("Postgres holds %q after Init(a) with Redis holding b and Postgres nothing; want b", got)
	}
}

func TestInitReplacesAStoredNameItDoesNotKnow(t *testing.T) {
	ctx := context.Background()
	rdb, pool := client(t), connect(t, database(t))
	if _, err := pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, 'retired')`, StrategySetting); err != nil {
		t.Fatal(err)
	}
	s := NewStrategy(rdb, pool, known, fast())
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatalf("Init(a) with Postgres holding an unknown name = %v", err)
	}
	if got, err := s.Get(ctx); got != "a" || err != nil || stored(t, pool) != "a" {
		t.Errorf("Get = %q, %v, Postgres %q; want a everywhere", got, err, stored(t, pool))
	}
}

func TestASwitchReachesEveryReplicaWithinTheRefresh(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	refresh := 50 * time.Millisecond
	one := NewStrategy(client(t), connect(t, url), known, Options{Refresh: refresh})
	two := NewStrategy(client(t), connect(t, url), known, Options{Refresh: refresh})
	if err := one.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := two.Get(ctx); got != "a" {
		t.Fatalf("replica two Get = %q, want a", got)
	}
	if err := one.Set(ctx, "b"); err != nil {
		t.Fatalf("Set(b) = %v", err)
	}
	time.Sleep(refresh + 10*time.Millisecond)
	if got, err := two.Get(ctx); got != "b" || err != nil {
		t.Errorf("replica two Get after switch and refresh = %q, %v; want b, nil", got, err)
	}
}

func TestSetAndInitRefuseUnknownNames(t *testing.T) {
	ctx := context.Background()
	s := NewStrategy(client(t), connect(t, database(t)), known, Options{})
	if err := s.Set(ctx, "zzz"); !errors.Is(err, errUnknown) {
		t.Errorf("Set(zzz) = %v, want errUnknown", err)
	}
	if err := s.Init(ctx, "zzz"); !errors.Is(err, errUnknown) {
		t.Errorf("Init(zzz) = %v, want errUnknown", err)
	}
}

func TestASwitchSurvivesRedisLosingEverything(t *testing.T) {
	ctx := context.Background()
	rdb, pool := client(t), connect(t, database(t))
	s := NewStrategy(rdb, pool, known, fast())
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // past the 1ms refresh: Get asks Redis again
	if got, err := s.Get(ctx); got != "b" || err != nil {
		t.Errorf("Get after Set(b) and FLUSHALL = %q, %v; want b, nil", got, err)
	}
	if got, err := rdb.Get(ctx, StrategyKey).Result(); got != "b" || err != nil {
		t.Errorf("Redis %s after Get = %q, %v; want b restored", StrategyKey, got, err)
	}
	// Another replica with no cache at all sees the same.
	if got, err := NewStrategy(rdb, pool, known, fast()).Get(ctx); got != "b" || err != nil {
		t.Errorf("a fresh replica's Get = %q, %v; want b, nil", got, err)
	}
}

func TestGetReadsPostgresWhenRedisIsDown(t *testing.T) {
	ctx := context.Background()
	srv := testenv.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	pool := connect(t, database(t))
	s := NewStrategy(rdb, pool, known, fast())
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if got, err := s.Get(ctx); got != "b" || err != nil {
		t.Errorf("Get with Redis stopped = %q, %v; want b from Postgres, nil", got, err)
	}
	if got, err := NewStrategy(rdb, pool, known, fast()).Get(ctx); got != "b" || err != nil {
		t.Errorf("a fresh replica's Get with Redis stopped = %q, %v; want b from Postgres, nil", got, err)
	}
	if err := s.Set(ctx, "a"); err == nil {
		t.Errorf("Set(a) with Redis stopped = nil, want an error")
	}
	if got := stored(t, pool); got != "b" {
		t.Errorf("Postgres holds %q after a switch that failed on Redis; want b (rolled back)", got)
	}
}

func TestGetFallsBackToPostgresWhenRedisHoldsAnUnknownName(t *testing.T) {
	ctx := context.Background()
	rdb, pool := client(t), connect(t, database(t))
	s := NewStrategy(rdb, pool, known, fast())
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, StrategyKey, "zzz", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if got, err := s.Get(ctx); got != "a" || err != nil {
		t.Errorf("Get with Redis holding zzz = %q, %v; want a from Postgres, nil", got, err)
	}
}

// logs collects log lines.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) count(level string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "level="+level)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestGetServesTheLastValueWhenBothAreDownAndLogsOnce(t *testing.T) {
	ctx := context.Background()
	srv := testenv.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	url := database(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var out logs
	s := NewStrategy(rdb, pool, known, Options{Refresh: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err := s.Init(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx); got != "b" {
		t.Fatalf("Get = %q, want b", got)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		time.Sleep(2 * time.Millisecond)
		if got, err := s.Get(ctx); got != "b" || err != nil {
			t.Fatalf("Get #%d with Redis stopped = %q, %v; want b from Postgres, nil", i, got, err)
		}
	}
	if n := out.count("WARN"); n != 1 {
		t.Errorf("20 reads with Redis down logged %d WARN lines, want 1:\n%s", n, out.String())
	}

	pool.Close() // Postgres unreachable too
	for i := range 20 {
		time.Sleep(2 * time.Millisecond)
		if got, err := s.Get(ctx); got != "b" || err == nil {
			t.Fatalf("Get #%d with Redis and Postgres gone = %q, %v; want the last value b and an error", i, got, err)
		}
	}
	if n := out.count("ERROR"); n != 1 {
		t.Errorf("20 reads with both down logged %d ERROR lines, want 1:\n%s", n, out.String())
	}
	if n := out.count("WARN"); n != 1 {
		t.Errorf("WARN lines = %d after both went down, want still 1:\n%s", n, out.String())
	}

	fresh := NewStrategy(rdb, pool, known, fast())
	if got, err := fresh.Get(ctx); got != "" || err == nil {
		t.Errorf("a fresh replica's Get with both down = %q, %v; want \"\" and an error", got, err)
	}
}

func TestConcurrentSwitchesLeaveRedisAndPostgresAgreeing(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	one := NewStrategy(client(t), connect(t, url), known, fast())
	two := NewStrategy(client(t), connect(t, url), known, fast())
	if err := one.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 50 {
		for j, s := range []*Strategy{one, two} {
			wg.Go(func() {
				<-start
				name := []string{"a", "b"}[(i+j)%2]
				if err := s.Set(ctx, name); err != nil {
					errs <- fmt.Errorf("Set(%s): %w", name, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	inRedis, err := one.rdb.Get(ctx, StrategyKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if inPG := stored(t, connect(t, url)); inRedis != inPG {
		t.Errorf("after 100 concurrent switches Redis holds %q and Postgres %q; want the same", inRedis, inPG)
	}
}

func TestOneSlowRefreshDoesNotHoldUpOtherReaders(t *testing.T) {
	ctx := context.Background()
	srv := testenv.RedisServer(t)
	// Default dial retries: a refresh against a stopped Redis takes ~0.5s.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	s := NewStrategy(rdb, connect(t, database(t)), known, fast())
	if err := s.Init(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	slow := make(chan string, 1)
	go func() { name, _ := s.Get(ctx); slow <- name }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		refreshing := s.refreshing
		s.mu.Unlock()
		if refreshing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first Get never started refreshing")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	got, err := s.Get(ctx)
	if took := time.Since(start); got != "b" || err != nil || took > 100*time.Millisecond {
		t.Errorf("Get while another refreshes = %q, %v after %v; want b, nil at once", got, err, took)
	}
	if got := <-slow; got != "b" {
		t.Errorf("the refreshing Get = %q, want b from Postgres", got)
	}
}

func TestACancelledCallerDoesNotCountAsABackendFailure(t *testing.T) {
	rdb, pool := client(t), connect(t, database(t))
	s := NewStrategy(rdb, pool, known, fast())
	if err := s.Init(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := s.Get(ctx); got != "a" || err != nil {
		t.Errorf("Get with a cancelled context = %q, %v; want a, nil", got, err)
	}
}
