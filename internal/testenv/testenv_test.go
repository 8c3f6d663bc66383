package testenv

import (
	"context"
	"testing"

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
