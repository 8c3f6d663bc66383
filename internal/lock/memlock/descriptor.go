package memlock

import (
	"context"

	"inventory/internal/lock/backend"
)

// Descriptor describes memlock on s to the service: no setting (it is
// always open, and no servers of its own), one kind of lock, one fencing
// counter (Backend). Give it to a list of backends in a test
// (backends.All() plus this one line); the service itself never lists it.
func (s *Server) Descriptor() backend.Descriptor {
	return backend.Descriptor{
		Name:   Backend,
		Fences: []string{Backend},
		Open: func(_ context.Context, c backend.Config) (backend.Lockers, error) {
			return backend.One(Backend, New(s, c.Options), nil), nil
		},
	}
}
