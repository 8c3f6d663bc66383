// Package backends is the one list of lock backends, the only place that
// names them. The service configures and opens them by it
// (cmd/inventory), and the tests' shared servers (internal/testenv's
// testservers) and the local fleet (internal/fleet) start their servers
// by it; each backend is a package that describes itself
// (backend.Descriptor), so none of them names a backend. It is a package
// of its own, not a variable of cmd/inventory, because a command cannot
// be imported. Adding a backend = its package + one line here
// (docs/adding-a-backend.md).
package backends

import (
	"inventory/internal/lock/backend"
	"inventory/internal/lock/etcdlock"
	"inventory/internal/lock/pglock"
	"inventory/internal/lock/redislock"
	"inventory/internal/lock/redlock"
	"inventory/internal/lock/zklock"
)

// All returns the lock backends, a new slice at each call: a caller may
// add to it (a test adds memlock) without changing anyone else's.
func All() []backend.Descriptor {
	return []backend.Descriptor{
		redislock.Descriptor,
		pglock.Descriptor,
		redlock.Descriptor,
		etcdlock.Descriptor,
		zklock.Descriptor,
	}
}
