package settings

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/testenv"
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
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestInitDoesNotOverwriteAStoredDefault(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	first, second := NewStrategy(rdb, known, time.Millisecond), NewStrategy(rdb, known, time.Millisecond)
	if err := first.Init(ctx, "a"); err != nil {
		t.Fatalf("Init(a) = %v", err)
	}
	if err := second.Init(ctx, "b"); err != nil {
		t.Fatalf("Init(b) = %v", err)
	}
	if got, err := second.Get(ctx); got != "a" || err != nil {
		t.Errorf("Get after Init(a), Init(b) = %q, %v; want a, nil", got, err)
	}
}

func TestASwitchReachesEveryReplicaWithinTheRefresh(t *testing.T) {
	ctx := context.Background()
	refresh := 50 * time.Millisecond
	one, two := NewStrategy(client(t), known, refresh), NewStrategy(client(t), known, refresh)
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
	s := NewStrategy(client(t), known, 0)
	if err := s.Set(ctx, "zzz"); !errors.Is(err, errUnknown) {
		t.Errorf("Set(zzz) = %v, want errUnknown", err)
	}
	if err := s.Init(ctx, "zzz"); !errors.Is(err, errUnknown) {
		t.Errorf("Init(zzz) = %v, want errUnknown", err)
	}
}

func TestGetKeepsTheLastValueWhenRedisIsGone(t *testing.T) {
	ctx := context.Background()
	srv := testenv.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	s := NewStrategy(rdb, known, time.Millisecond)
	if err := s.Init(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx); got != "b" {
		t.Fatalf("Get = %q, want b", got)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	got, err := s.Get(ctx)
	if got != "b" || err == nil {
		t.Errorf("Get with Redis stopped = %q, %v; want the last value b and an error", got, err)
	}
}
