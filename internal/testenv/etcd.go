package testenv

import (
	"context"
	"testing"

	"inventory/internal/localstack"
	"inventory/internal/lock/etcdlock/etcdserve"
)

// EtcdEnv points the tests at an etcd you already run: comma-separated
// host:port client endpoints (ServerEnv of etcdlock's setting).
const EtcdEnv = "INVENTORY_TEST_ETCD_ENDPOINTS"

// etcdSetting is etcdlock.Setting, whose tests import this package, which
// therefore cannot import etcdlock (TestServersByNameAreTheDescriptors
// holds the two together).
const etcdSetting = "INVENTORY_ETCD_ENDPOINTS"

// EtcdEndpoints returns the client endpoints of the etcd the tests share:
// EtcdEnv's when set, else one started by etcdlock's Server on first use
// and stopped when the test binary ends (see LockServer). Tests sharing
// it (other test binaries' too: see sharedServers) must use keys of
// their own.
func EtcdEndpoints(t testing.TB) []string {
	t.Helper()
	return splitList(LockServer(t, etcdSetting, &etcdserve.Server))
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
