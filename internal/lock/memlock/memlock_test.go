package memlock

import (
	"testing"

	"inventory/internal/lock"
	"inventory/internal/lock/locktest"
)

// TestContract runs the suite every backend passes, every Locker on one
// Server ("the server"). A lease is lost by letting its key go on the
// server, which tells the holder at once.
func TestContract(t *testing.T) {
	s := NewServer()
	locktest.Run(t, locktest.Config{
		New: func(t *testing.T, o lock.Options) lock.Locker { return New(s, o) },
		Lose: func(t *testing.T, l lock.Lease) {
			if !s.Expire(l.Key()) {
				t.Fatalf("Expire(%q): not held", l.Key())
			}
		},
	})
}
