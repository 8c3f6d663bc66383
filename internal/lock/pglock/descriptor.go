package pglock

import (
	"context"

	"inventory/internal/lock/backend"
)

// Descriptor describes pglock to the service: its locks live in the
// service's own Postgres (the locks table), so it needs no setting and is
// always open; one kind of lock, the plain one; one fencing counter, the
// locks row's grant count (Backend).
var Descriptor = backend.Descriptor{
	Name:   Backend,
	Fences: []string{Backend},
	Open: func(_ context.Context, c backend.Config) (backend.Lockers, error) {
		// Close waits for the releases of acquires whose outcome was
		// unknown, still running in the background.
		l := New(c.Postgres, Options{Options: c.Options})
		return backend.One(Backend, l, l.Close), nil
	},
}
