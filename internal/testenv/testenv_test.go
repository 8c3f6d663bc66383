package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { Main(m) }

func TestPostgresURLGivesIsolatedDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := PostgresURL(t), PostgresURL(t)
	if a == b {
		t.Fatalf("PostgresURL returned %q twice, want distinct databases", a)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatalf("connect %s: %v", a, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	conn2, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatalf("connect %s: %v", b, err)
	}
	defer conn2.Close(ctx)
	if _, err := conn2.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatalf("create the same table in the second database: %v", err)
	}
}

func TestRedisURLIsFlushed(t *testing.T) {
	ctx := context.Background()
	opts, _ := redis.ParseURL(RedisURL(t))
	c := redis.NewClient(opts)
	defer c.Close()
	c.Set(ctx, "left-over", 1, 0)
	RedisURL(t)
	if n, _ := c.Exists(ctx, "left-over").Result(); n != 0 {
		t.Errorf("key from an earlier test survived RedisURL: EXISTS = %d", n)
	}
}

// TestAVariableNamesTheServer: with its variable set, a server is taken
// from it and never started (what make test's testservers relies on).
func TestAVariableNamesTheServer(t *testing.T) {
	t.Setenv("INVENTORY_TEST_EXAMPLE", "127.0.0.1:1, 127.0.0.1:2,")
	s := &server{env: "INVENTORY_TEST_EXAMPLE", what: "example", start: func(context.Context) (string, func(), error) {
		t.Fatal("started a server although INVENTORY_TEST_EXAMPLE names one")
		return "", nil, nil
	}}
	if got := splitList(s.get(t)); len(got) != 2 || got[0] != "127.0.0.1:1" || got[1] != "127.0.0.1:2" {
		t.Errorf("splitList(get) = %q, want [127.0.0.1:1 127.0.0.1:2]", got)
	}
}

// TestStartSharedLeavesNamedServersAlone: StartShared starts nothing whose
// variable is already set, and adds no variable for it.
func TestStartSharedLeavesNamedServersAlone(t *testing.T) {
	for _, s := range shared {
		t.Setenv(s.env, "named-by-the-caller")
	}
	env, stop, err := StartShared(context.Background())
	if err != nil || len(env) != 0 {
		t.Fatalf("StartShared with every variable set = %q, %v; want nothing started", env, err)
	}
	stop()
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	WaitFor(t, "the third poll", time.Minute, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("WaitFor polled %d times, want it to stop at the third, which held", n)
	}
}
