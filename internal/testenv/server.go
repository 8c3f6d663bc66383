package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"inventory/internal/lock/backend"
)

// server is a kind of server the tests use: the environment variable that
// names one already running, and how to start a throw-away one, which gives
// the variable's value for it and how to stop it. A test binary finds or
// starts each kind once, on first use (get); StartShared starts the
// shareable ones once for many test binaries.
type server struct {
	env   string // e.g. INVENTORY_TEST_POSTGRES_URL
	what  string // e.g. "Postgres", for errors
	hint  string // how to provide one, for errors
	start func(context.Context) (value string, stop func(), err error)

	once  sync.Once
	value string
	err   error
}

// get returns the server's value: its variable's when set, else that of one
// started on first use and stopped when the binary's tests end (see Main).
// It fails t, saying how to provide one, when none can be had.
func (s *server) get(t testing.TB) string {
	t.Helper()
	s.once.Do(func() {
		if s.value = os.Getenv(s.env); s.value != "" {
			return
		}
		var stop func()
		if s.value, stop, s.err = s.start(context.Background()); s.err == nil {
			onExit(stop)
		}
	})
	if s.err != nil {
		t.Fatalf("no %s for the tests: %v\n(%s)", s.what, s.err, s.hint)
	}
	return s.value
}

// splitList splits a comma-separated list of addresses, dropping blanks.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// sharedServers are the servers one `go test ./...` can start once for all
// its test binaries, which run at the same time (-p): each test isolates
// itself on them, so sharing is safe.
//
//   - Postgres: PostgresURL creates a database of the test's own, named
//     after the binary's process id.
//   - the servers of every lock backend of lockBackends whose Server is
//     Shared (etcd's and ZooKeeper's): each test locks under a prefix or
//     root of its own, or names of its own (product ids, random locktest
//     keys); no test deletes or counts what is not its own.
//
// Redis is not shared. RedisURL flushes the server for each test, and
// Redis's pub/sub channels (the waiters' release notices) are global to
// the server, whatever the database: two binaries on one Redis would flush
// each other's keys and hear each other's notices. A redis-server starts
// in milliseconds, so each binary keeps its own, as it does the Redlock
// servers (FlushRedlock; redlock's Server is not Shared). Tests that stop,
// pause or restart a server (RedisServer, EtcdServer, ZooKeeperServer,
// RedlockServers, the fleets) start private ones in any case.
func sharedServers(lockBackends []backend.Descriptor) []*server {
	shared := []*server{pgServer}
	for _, d := range lockBackends {
		if d.Server != nil && d.Server.Shared {
			shared = append(shared, lockServer(d.Setting, d.Server))
		}
	}
	return shared
}

// StartShared starts the servers every test binary can share (Postgres,
// and those of the lockBackends that share theirs: see sharedServers) at
// once, except those whose variable is already set, and returns the
// variables ("NAME=value") that point test binaries at them, and a func
// that stops them. A test binary with these variables set starts none of
// them itself.
func StartShared(ctx context.Context, lockBackends []backend.Descriptor) (env []string, stop func(), err error) {
	shared := sharedServers(lockBackends)
	values := make([]string, len(shared))
	stops := make([]func(), len(shared))
	errs := make([]error, len(shared))
	var wg sync.WaitGroup
	for i, s := range shared {
		if os.Getenv(s.env) != "" {
			continue
		}
		wg.Go(func() {
			values[i], stops[i], errs[i] = s.start(ctx)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w\n(%s)", s.what, errs[i], s.hint)
			}
		})
	}
	wg.Wait()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			if stops[i] != nil {
				stops[i]()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, nil, err
	}
	for i, s := range shared {
		if values[i] != "" {
			env = append(env, s.env+"="+values[i])
		}
	}
	return env, stop, nil
}
