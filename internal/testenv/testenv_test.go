package testenv

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"inventory/internal/lock/backend"
	"inventory/internal/lock/backends"
	"inventory/internal/lock/etcdlock/etcdserve"
	"inventory/internal/lock/redlock/redlockserve"
	"inventory/internal/lock/zklock/zkserve"
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
	for _, s := range sharedServers(backends.All()) {
		t.Setenv(s.env, "named-by-the-caller")
	}
	env, stop, err := StartShared(context.Background(), backends.All())
	if err != nil || len(env) != 0 {
		t.Fatalf("StartShared with every variable set = %q, %v; want nothing started", env, err)
	}
	stop()
}

// TestStartSharedStartsEveryLockBackendsSharedServer: StartShared starts
// the servers of every lock backend in the list it is given whose Server
// is Shared, by that Server, names each in its ServerEnv, and stops them
// all; it starts none that is not Shared, and asks nothing of a backend
// without a Server.
func TestStartSharedStartsEveryLockBackendsSharedServer(t *testing.T) {
	t.Setenv(PostgresEnv, "named-by-the-caller")
	var mu sync.Mutex // StartShared starts them side by side
	var started, stopped []string
	fake := func(name string, shared bool) *backend.Server {
		return &backend.Server{Needs: []string{"true"}, Shared: shared, Start: func(context.Context, backend.ServerOptions) (backend.Servers, error) {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, name)
			return fakeServers{setting: name + "-value", stop: func() { stopped = append(stopped, name) }}, nil
		}}
	}
	list := []backend.Descriptor{
		{Name: "alock", Setting: "INVENTORY_ALOCK_SERVERS", Server: fake("alock", true)},
		{Name: "nolock"},
		{Name: "block", Setting: "INVENTORY_BLOCK_URLS", Server: fake("block", false)},
		{Name: "clock", Setting: "INVENTORY_CLOCK_ENDPOINTS", Server: fake("clock", true)},
	}
	env, stop, err := StartShared(context.Background(), list)
	if err != nil {
		t.Fatalf("StartShared(alock, nolock, block, clock) = %v", err)
	}
	slices.Sort(env)
	if want := []string{"INVENTORY_TEST_ALOCK_SERVERS=alock-value", "INVENTORY_TEST_CLOCK_ENDPOINTS=clock-value"}; !slices.Equal(env, want) {
		t.Errorf("StartShared(alock, nolock, block, clock) = %q, want %q: the shared ones, each in its ServerEnv", env, want)
	}
	slices.Sort(started)
	if !slices.Equal(started, []string{"alock", "clock"}) {
		t.Errorf("StartShared started %q, want alock's and clock's (block's is not Shared)", started)
	}
	stop()
	slices.Sort(stopped)
	if !slices.Equal(stopped, started) {
		t.Errorf("stop stopped %q, want every one started, %q", stopped, started)
	}
}

type fakeServers struct {
	setting string
	stop    func()
}

func (f fakeServers) Setting() string                { return f.setting }
func (f fakeServers) Logs() map[string]func() string { return nil }
func (f fakeServers) Stop() error                    { f.stop(); return nil }

// TestServersByNameAreTheDescriptors: the servers tests ask for by name
// (EtcdEndpoints, ZooKeeperServers, RedlockURLs) are those their backends'
// Descriptors start, under the backends' settings, so that make test's
// shared servers (StartShared, by the Descriptors) are the ones they find.
func TestServersByNameAreTheDescriptors(t *testing.T) {
	byName := map[string]struct {
		env, setting string
		server       *backend.Server
	}{
		"etcdlock": {EtcdEnv, etcdSetting, &etcdserve.Server},
		"zklock":   {ZooKeeperEnv, zkSetting, &zkserve.Server},
		"redlock":  {RedlockEnv, redlockSetting, &redlockserve.Server},
	}
	for _, d := range backends.All() {
		w, ok := byName[d.Name]
		if !ok {
			continue
		}
		delete(byName, d.Name)
		if d.Setting != w.setting || d.Server != w.server || ServerEnv(d.Setting) != w.env {
			t.Errorf("backend %s: setting %s, Server %p, variable %s; by name: setting %s, Server %p, variable %s",
				d.Name, d.Setting, d.Server, ServerEnv(d.Setting), w.setting, w.server, w.env)
		}
	}
	for name := range byName {
		t.Errorf("the servers of %s, asked for by name, are of no backend in backends.All", name)
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	WaitFor(t, "the third poll", time.Minute, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("WaitFor polled %d times, want it to stop at the third, which held", n)
	}
}
