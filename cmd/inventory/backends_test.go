package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock/backend"
	"inventory/internal/lock/memlock"
	"inventory/internal/postgres"
	"inventory/internal/testenv"
)

// TestOneListOfLockBackends: the list names each backend once, no two
// backends share a fencing counter (their tokens would be compared), a
// backend with a setting checks it and says how to start throw-away
// servers for it, and every lock strategy takes its lock from a backend
// of the list whose setting is the one the strategy says it needs.
func TestOneListOfLockBackends(t *testing.T) {
	checkBackends(t, lockBackends)
}

// checkBackends checks list as TestOneListOfLockBackends says.
func checkBackends(t *testing.T, list []backend.Descriptor) {
	t.Helper()
	byName := map[string]backend.Descriptor{}
	counters := map[string]string{}
	for _, d := range list {
		if _, dup := byName[d.Name]; dup || d.Name == "" || d.Open == nil {
			t.Errorf("backend %q: named twice, unnamed or without Open", d.Name)
		}
		byName[d.Name] = d
		if d.Setting != "" && d.Check == nil {
			t.Errorf("backend %s: setting %s has no Check", d.Name, d.Setting)
		}
		// Without a Server, neither the tests nor the local fleet could
		// run a backend with servers of its own; one without a setting
		// runs on the service's Postgres or Redis, which they start anyway.
		if (d.Setting != "") != (d.Server != nil) || d.Server != nil && (d.Server.Start == nil || len(d.Server.Needs) == 0) {
			t.Errorf("backend %s: setting %q, Server %+v; want a Server (Start and Needs) exactly when there is a setting", d.Name, d.Setting, d.Server)
		}
		if len(d.Fences) == 0 {
			t.Errorf("backend %s names no fencing counter", d.Name)
		}
		for _, c := range d.Fences {
			if other, dup := counters[c]; dup {
				t.Errorf("fencing counter %q is both %s's and %s's", c, other, d.Name)
			}
			counters[c] = d.Name
		}
	}
	for _, info := range inventory.Strategies {
		if info.Lock == "" {
			continue
		}
		d, ok := byName[info.LockBackend()]
		if !ok {
			t.Errorf("strategy %s takes its lock from %q, a backend not in the list", info.Name, info.Lock)
			continue
		}
		if info.Needs != d.Setting {
			t.Errorf("strategy %s needs %q, but its backend %s's setting is %q", info.Name, info.Needs, d.Name, d.Setting)
		}
	}
	if !slices.ContainsFunc(inventory.Strategies, func(i inventory.Info) bool { return i.Lock != "" }) {
		t.Fatal("no strategy takes a lock of a backend")
	}
}

// TestANewBackendIsOnePackageAndOneLine: memlock, the example backend of
// docs/adding-a-backend.md, joins the list with one line, which still
// passes TestOneListOfLockBackends' checks, configures and opens with the
// others, and hands out its lock; stock's
// TestANewBackendSellsThroughTheGenericFencedSale sells under it.
func TestANewBackendIsOnePackageAndOneLine(t *testing.T) {
	server := memlock.NewServer()
	list := append(slices.Clone(lockBackends), server.Descriptor()) // the one line
	checkBackends(t, list)

	ctx := context.Background()
	pgURL := testenv.PostgresURL(t)
	cfg, err := loadConfigWith(envFrom(map[string]string{
		"INVENTORY_INSTANCE": "one-line", "INVENTORY_POSTGRES_URL": pgURL, "INVENTORY_REDIS_URL": testenv.RedisURL(t),
	}), list)
	if err != nil {
		t.Fatalf("loadConfigWith(the list and memlock) = %v", err)
	}
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	lockers, closeAll, err := openLockers(ctx, cfg, list, pool, rdb, postgres.NewStore(pool, postgres.Limits{}), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openLockers(the list and memlock) = %v", err)
	}
	defer closeAll()
	if lockers[inventory.RedisLock] == nil || lockers[inventory.PgLock] == nil {
		t.Errorf("openLockers with memlock added gave redis %v and pglock %v, want both as without it", lockers[inventory.RedisLock], lockers[inventory.PgLock])
	}
	open, err := server.Descriptor().Open(ctx, backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := open.Locker("")
	if err != nil {
		t.Fatalf("memlock's plain Locker: %v", err)
	}
	lease, err := l.TryLock(ctx, "lock:{one-line}")
	if err != nil || lease.Fence().Backend != memlock.Backend {
		t.Fatalf("TryLock of memlock = %v, %v; want a lease fenced by counter %s", lease, err, memlock.Backend)
	}
	if err := lease.Release(ctx); err != nil {
		t.Errorf("Release = %v", err)
	}
	if _, err := open.Locker("fair"); err == nil {
		t.Errorf("memlock's Locker(\"fair\") = nil error, want one naming the kinds it has")
	}
}

// TestAStrategyOfABackendNotListedStopsTheStart: a strategy whose lock's
// backend is not in the list is a mistake of the list, found at start.
func TestAStrategyOfABackendNotListedStopsTheStart(t *testing.T) {
	var without []backend.Descriptor
	for _, d := range lockBackends {
		if d.Name != "pglock" {
			without = append(without, d)
		}
	}
	_, _, err := openLockers(context.Background(), config{}, without, nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `"pglock"`) {
		t.Errorf("openLockers without pglock = %v, want an error naming the strategy's lock pglock", err)
	}
}
