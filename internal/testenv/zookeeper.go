package testenv

import (
	"context"
	"testing"

	"inventory/internal/localstack"
)

// ZooKeeperEnv points the tests at a ZooKeeper ensemble you already run
// (comma-separated host:port, like INVENTORY_ZOOKEEPER_SERVERS).
const ZooKeeperEnv = "INVENTORY_TEST_ZOOKEEPER_SERVERS"

const zkInstall = "apt-get install -y --no-install-recommends libzookeeper-java default-jre-headless"

var zkServer = &server{env: ZooKeeperEnv, what: "ZooKeeper", start: startZooKeeper,
	hint: "set " + ZooKeeperEnv + " to servers you run, or install it: " + zkInstall}

// ZooKeeperServers returns the addresses of the shared ZooKeeper: from
// INVENTORY_TEST_ZOOKEEPER_SERVERS, else one local server (without fsync)
// started on first use and stopped when the binary's tests end. Tests share
// it (other test binaries' too: see shared): keep their znodes apart (a
// root or key of their own).
func ZooKeeperServers(t testing.TB) []string {
	t.Helper()
	return splitList(zkServer.get(t))
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

func startZooKeeper(ctx context.Context) (string, func(), error) {
	z, err := localstack.StartZooKeeper(ctx, localstack.ZooKeeperOptions{NoFsync: true})
	if err != nil {
		return "", nil, err
	}
	return z.Addr, func() { _ = z.Stop() }, nil
}
