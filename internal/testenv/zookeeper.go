package testenv

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"inventory/internal/localstack"
)

// ZooKeeperEnv points the tests at a ZooKeeper ensemble you already run
// (comma-separated host:port, like INVENTORY_ZOOKEEPER_SERVERS).
const ZooKeeperEnv = "INVENTORY_TEST_ZOOKEEPER_SERVERS"

var (
	zkOnce    sync.Once
	zkServers []string
	zkErr     error
)

// ZooKeeperServers returns the addresses of the shared ZooKeeper: from
// INVENTORY_TEST_ZOOKEEPER_SERVERS, else one local server (without fsync)
// started on first use and stopped when the binary's tests end. Tests share
// it: keep their znodes apart (a root or key of their own).
func ZooKeeperServers(t testing.TB) []string {
	t.Helper()
	zkOnce.Do(func() { zkServers, zkErr = startZooKeeper() })
	if zkErr != nil {
		t.Fatalf("no ZooKeeper for the tests: %v\n(set %s to servers you run, or install it: apt-get install -y --no-install-recommends libzookeeper-java default-jre-headless)", zkErr, ZooKeeperEnv)
	}
	return zkServers
}

// ZooKeeperServer starts a private ZooKeeper for this test, for tests that
// restart or pause it; it is stopped when the test ends.
func ZooKeeperServer(t testing.TB) *localstack.ZooKeeper {
	t.Helper()
	z, err := localstack.StartZooKeeper(context.Background(), localstack.ZooKeeperOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("start a private ZooKeeper: %v\n(install it: apt-get install -y --no-install-recommends libzookeeper-java default-jre-headless)", err)
	}
	t.Cleanup(func() { _ = z.Stop() })
	return z
}

func startZooKeeper() ([]string, error) {
	if s := os.Getenv(ZooKeeperEnv); s != "" {
		return strings.Split(s, ","), nil
	}
	z, err := localstack.StartZooKeeper(context.Background(), localstack.ZooKeeperOptions{NoFsync: true})
	if err != nil {
		return nil, err
	}
	onExit(func() { _ = z.Stop() })
	return []string{z.Addr}, nil
}
