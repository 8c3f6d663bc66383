package testenv

import (
	"context"
	"testing"

	"inventory/internal/localstack"
	"inventory/internal/lock/zklock/zkserve"
)

// ZooKeeperEnv points the tests at a ZooKeeper ensemble you already run
// (comma-separated host:port, like INVENTORY_ZOOKEEPER_SERVERS: ServerEnv
// of zklock's setting).
const ZooKeeperEnv = "INVENTORY_TEST_ZOOKEEPER_SERVERS"

// zkSetting is zklock.Setting (see etcdSetting).
const zkSetting = "INVENTORY_ZOOKEEPER_SERVERS"

const zkInstall = "apt-get install -y --no-install-recommends libzookeeper-java default-jre-headless"

// ZooKeeperServers returns the addresses of the shared ZooKeeper: from
// INVENTORY_TEST_ZOOKEEPER_SERVERS, else one started by zklock's Server
// (without fsync) on first use and stopped when the binary's tests end
// (see LockServer). Tests share it (other test binaries' too: see
// sharedServers): keep their znodes apart (a root or key of their own).
func ZooKeeperServers(t testing.TB) []string {
	t.Helper()
	return splitList(LockServer(t, zkSetting, &zkserve.Server))
}

// ZooKeeperServer starts a private ZooKeeper for this test, for tests that
// restart or pause it; it is stopped when the test ends.
func ZooKeeperServer(t testing.TB) *localstack.ZooKeeper {
	t.Helper()
	z, err := localstack.StartZooKeeper(context.Background(), localstack.ZooKeeperOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("start a private ZooKeeper: %v\n(install it: %s)", err, zkInstall)
	}
	t.Cleanup(func() { _ = z.Stop() })
	return z
}
