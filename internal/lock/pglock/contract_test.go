package pglock

import (
	"testing"

	"inventory/internal/lock"
	"inventory/internal/lock/locktest"
)

// TestContract runs the suite every backend passes, each Locker on a pool
// of its own ("a replica"). A lease is lost by expiring its row, which
// lets another take it over; the holder learns at its local deadline.
func TestContract(t *testing.T) {
	url, admin := newDB(t)
	locktest.Run(t, locktest.Config{
		New: func(t *testing.T, o lock.Options) lock.Locker {
			return New(newPool(t, url), Options{Options: o})
		},
		Lose: func(t *testing.T, l lock.Lease) {
			if _, err := admin.Exec(t.Context(), `UPDATE locks SET expires_at = clock_timestamp() WHERE name = $1`, l.Key()); err != nil {
				t.Fatalf("expire the row of %q: %v", l.Key(), err)
			}
		},
	})
}
