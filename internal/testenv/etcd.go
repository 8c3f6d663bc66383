package testenv

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"inventory/internal/localstack"
)

// EtcdEnv points the tests at an etcd you already run: comma-separated
// host:port client endpoints.
const EtcdEnv = "INVENTORY_TEST_ETCD_ENDPOINTS"

var (
	etcdOnce      sync.Once
	etcdEndpoints []string
	etcdErr       error
)

// EtcdEndpoints returns the client endpoints of the etcd the tests share:
// EtcdEnv's when set, else one local etcd process started on first use and
// stopped when the test binary ends (see Main). Tests sharing it must use
// keys of their own.
func EtcdEndpoints(t testing.TB) []string {
	t.Helper()
	etcdOnce.Do(func() { etcdEndpoints, etcdErr = startEtcd() })
	if etcdErr != nil {
		t.Fatalf("no etcd for the tests: %v\n(set %s to host:port of one you run, or install etcd-server: apt-get install -y etcd-server)", etcdErr, EtcdEnv)
	}
	return etcdEndpoints
}

// EtcdServer starts a private etcd process for this test, for tests that
// stop, pause or restart it; it is stopped when the test ends.
func EtcdServer(t testing.TB) *localstack.Etcd {
	t.Helper()
	e, err := localstack.StartEtcd(context.Background())
	if err != nil {
		t.Fatalf("start a private etcd: %v\n(install it: apt-get install -y etcd-server)", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e
}

func startEtcd() ([]string, error) {
	if v := os.Getenv(EtcdEnv); v != "" {
		var eps []string
		for _, ep := range strings.Split(v, ",") {
			if ep = strings.TrimSpace(ep); ep != "" {
				eps = append(eps, ep)
			}
		}
		return eps, nil
	}
	e, err := localstack.StartEtcd(context.Background())
	if err != nil {
		return nil, err
	}
	onExit(func() { _ = e.Stop() })
	return []string{e.Endpoint}, nil
}
