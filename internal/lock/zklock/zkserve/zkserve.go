// Package zkserve starts the throw-away ZooKeeper that zklock's tests and
// the local fleet run on (zklock.Descriptor.Server): one standalone server
// on a free loopback port, as internal/localstack starts it. It imports
// none of zklock, whose own tests reach it through internal/testenv.
package zkserve

import (
	"context"

	"inventory/internal/localstack"
	"inventory/internal/lock/backend"
)

// Server is zklock's: one standalone ZooKeeper, whose address is the
// setting, flushing its transaction log only when ServerOptions.Durable
// says so (FakeClock changes nothing). Test binaries share it: each test
// keeps its znodes apart (a root or key of its own).
var Server = backend.Server{Start: start, Needs: []string{"java"}, Shared: true}

func start(ctx context.Context, o backend.ServerOptions) (backend.Servers, error) {
	z, err := localstack.StartZooKeeper(ctx, localstack.ZooKeeperOptions{NoFsync: !o.Durable})
	if err != nil {
		return nil, err
	}
	return backend.OneServer(z.Addr, "zookeeper.log", z), nil
}
