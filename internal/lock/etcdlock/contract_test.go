package etcdlock

import (
	"testing"

	"inventory/internal/lock"
	"inventory/internal/lock/locktest"
	"inventory/internal/testenv"
)

// TestContract runs the suite every backend passes, each Locker on a
// client and session of its own ("a process"). A lease is lost by
// deleting its key, which its watch reports at once.
func TestContract(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	leakCheck(t)
	c := newClient(t, eps)
	pfx := prefix(t)
	locktest.Run(t, locktest.Config{
		New: func(t *testing.T, o lock.Options) lock.Locker {
			return newLocker(t, eps, Options{Options: o, Prefix: pfx})
		},
		Lose: func(t *testing.T, l lock.Lease) {
			if _, err := c.Delete(t.Context(), l.(*Lease).EtcdKey()); err != nil {
				t.Fatalf("delete %s: %v", l.(*Lease).EtcdKey(), err)
			}
		},
	})
}
