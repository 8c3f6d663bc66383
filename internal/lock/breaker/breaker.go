// Package breaker is what a fault needs of a lock backend to find a
// product's lock and take it from its holder behind the holder's back, as
// a lease that ended early would (lock-expired-early). Each backend that a
// fault can break has a sub-package exporting one Breaker, which reads the
// backend's servers directly, as an operator would, and imports none of
// the backend's code, so that a fault does not share the bugs of the code
// it tests; faults' TestLockLayoutAgreesWithTheBackends holds each one's
// reading of the backend's layout against what the backend really writes.
package breaker

import (
	"context"
	"time"
)

// Breaker is one lock backend's hooks for a fault.
type Breaker struct {
	// Backend is the backend's name (backend.Descriptor.Name).
	Backend string
	// Where says where the backend keeps its locks, for messages: "etcd",
	// "the locks table", …
	Where string
	// Open connects to where the backend keeps its locks, as s names it;
	// false when s names no such place (the backend is not configured).
	Open func(ctx context.Context, s Servers) (Locks, bool, error)
}

// Servers is where a fleet's backends keep their locks, as the service
// was told: its own Postgres and Redis, and the backends' settings.
type Servers struct {
	// Postgres and Redis are the URLs of the service's own servers; ""
	// when it has none of that kind.
	Postgres, Redis string
	// Settings are the lock backends' settings by variable
	// (INVENTORY_ETCD_ENDPOINTS: "127.0.0.1:2379", …), as the replicas got
	// them.
	Settings map[string]string
}

// Locks is an open connection to where one backend keeps its locks.
type Locks interface {
	// Holder returns the current holder of the lock named name (a
	// product's lock:{id}), or false when it is not held here.
	Holder(ctx context.Context, name string) (Holder, bool, error)
	// Close closes the connection.
	Close()
}

// Holder is one holder of a lock.
type Holder struct {
	// ID tells this holder from every other holder of the lock.
	ID string
	// Take ends its hold, only if it still holds the lock; false when it
	// had let go already.
	Take func(context.Context) (bool, error)
	// Settle is how long it must have been the holder before it is taken:
	// an etcd key or a ZooKeeper node is the oldest before its owner's
	// Lock has seen so and returned, and taken then, that Lock fails
	// instead of a held lease ending. 0: at once.
	Settle time.Duration
}
