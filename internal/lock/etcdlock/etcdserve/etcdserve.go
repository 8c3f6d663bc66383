// Package etcdserve starts the throw-away etcd that etcdlock's tests and
// the local fleet run on (etcdlock.Descriptor.Server): one member on free
// loopback ports, as internal/localstack starts it. It imports none of
// etcdlock, whose own tests reach it through internal/testenv.
package etcdserve

import (
	"context"

	"inventory/internal/localstack"
	"inventory/internal/lock/backend"
)

// Server is etcdlock's: one etcd member, whose client endpoint is the
// setting. Test binaries share it: each test locks under keys of its own.
// etcd always flushes its writes, so ServerOptions.Durable changes
// nothing; nor does FakeClock (etcd is a Go program, whose clock
// libfaketime cannot move).
var Server = backend.Server{Start: start, Needs: []string{"etcd"}, Shared: true}

func start(ctx context.Context, _ backend.ServerOptions) (backend.Servers, error) {
	e, err := localstack.StartEtcd(ctx)
	if err != nil {
		return nil, err
	}
	return backend.OneServer(e.Endpoint, "etcd.log", e), nil
}
