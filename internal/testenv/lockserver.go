package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"inventory/internal/lock/backend"
)

// ServerEnv is the variable that points the tests at running servers of
// the lock backend whose setting is setting, instead of throw-away ones:
// the setting with TEST_ after INVENTORY_ (INVENTORY_ETCD_ENDPOINTS →
// INVENTORY_TEST_ETCD_ENDPOINTS).
func ServerEnv(setting string) string {
	return "INVENTORY_TEST_" + strings.TrimPrefix(setting, "INVENTORY_")
}

var (
	lockMu      sync.Mutex
	lockServers = map[string]*server{} // by variable: each started once per test binary at most
)

// LockServer returns the value of setting for a test, setting being that
// of a lock backend with servers of its own and s its Server
// (backend.Descriptor.Setting and .Server): ServerEnv(setting)'s when set
// (make test names the shared ones there: see StartShared), else that of
// servers s starts on the first call in this test binary and stops when
// its tests end (see Main). Tests that share them (other test binaries'
// too, when s is Shared) keep to keys of their own.
func LockServer(t testing.TB, setting string, s *backend.Server) string {
	t.Helper()
	return lockServer(setting, s).get(t)
}

// lockServer is the server of setting, started by s; the same one for
// every call with the same setting.
func lockServer(setting string, s *backend.Server) *server {
	env := ServerEnv(setting)
	lockMu.Lock()
	defer lockMu.Unlock()
	if srv := lockServers[env]; srv != nil {
		return srv
	}
	srv := &server{env: env, what: "servers for " + setting,
		hint: fmt.Sprintf("set %s to servers you run, as %s would name them, or let the tests start their own: they run %s, which make deps installs",
			env, setting, strings.Join(s.Needs, ", ")),
		start: func(ctx context.Context) (string, func(), error) {
			started, err := s.Start(ctx, backend.ServerOptions{})
			if err != nil {
				return "", nil, err
			}
			return started.Setting(), func() { _ = started.Stop() }, nil
		},
	}
	lockServers[env] = srv
	return srv
}
