package redlock

import (
	"testing"

	"inventory/internal/lock"
	"inventory/internal/lock/locktest"
)

// TestContract runs the suite every backend passes over the three shared
// servers, each Locker with clients of its own ("a process"). A lease is
// lost by deleting its key from every server; nothing renews it, so its
// holder learns at the end of its validity. Concurrent tries can split the
// servers so that none wins a majority.
func TestContract(t *testing.T) {
	urls := shared(t)
	direct := clients(t, urls)
	locktest.Run(t, locktest.Config{
		New: func(t *testing.T, o lock.Options) lock.Locker {
			return newLocker(t, urls, Options{Options: o})
		},
		Lose: func(t *testing.T, l lock.Lease) {
			for i, c := range direct {
				if err := c.Del(t.Context(), l.Key()).Err(); err != nil {
					t.Fatalf("DEL %s on server %d: %v", l.Key(), i, err)
				}
			}
		},
		SplitVotes: true,
	})
}
