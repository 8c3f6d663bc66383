package testenv

import (
	"context"
	"testing"

	"inventory/internal/localstack"
)

// EtcdEnv points the tests at an etcd you already run: comma-separated
// host:port client endpoints.
const EtcdEnv = "INVENTORY_TEST_ETCD_ENDPOINTS"

var etcdServer = &server{env: EtcdEnv, what: "etcd", start: startEtcd,
	hint: "set " + EtcdEnv + " to host:port of one you run, or install etcd-server: apt-get install -y etcd-server"}

// EtcdEndpoints returns the client endpoints of the etcd the tests share:
// EtcdEnv's when set, else one local etcd process started on first use and
// stopped when the test binary ends (see Main). Tests sharing it (other
// test binaries' too: see shared) must use keys of their own.
func EtcdEndpoints(t testing.TB) []string {
	t.Helper()
	return splitList(etcdServer.get(t))
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

func startEtcd(ctx context.Context) (string, func(), error) {
	e, err := localstack.StartEtcd(ctx)
	if err != nil {
		return "", nil, err
	}
	return e.Endpoint, func() { _ = e.Stop() }, nil
}
