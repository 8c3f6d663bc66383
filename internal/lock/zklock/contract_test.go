package zklock

import (
	"testing"

	"go.uber.org/goleak"

	"inventory/internal/lock"
	"inventory/internal/lock/locktest"
	"inventory/internal/testenv"
)

// TestContract runs the suite every backend passes, each Locker a session
// of its own ("a process"). A lease is lost by deleting its node, which
// its watch reports at once. It ends once every session's goroutines have
// (a ZooKeeper client's outlive its Close for a moment), so that the next
// test's leak check does not see them.
func TestContract(t *testing.T) {
	servers := testenv.ZooKeeperServers(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testenv.NoLeaks(t, ignore) })
	c := inspector(t, servers)
	root := testRoot(t)
	locktest.Run(t, locktest.Config{
		New: func(t *testing.T, o lock.Options) lock.Locker {
			return newLocker(t, servers, Options{Options: o, Root: root})
		},
		Lose: func(t *testing.T, l lock.Lease) {
			if err := c.Delete(l.(*Lease).Path(), -1); err != nil {
				t.Fatalf("delete %s: %v", l.(*Lease).Path(), err)
			}
		},
	})
}
