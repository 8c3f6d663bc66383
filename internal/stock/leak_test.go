package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

// TestNoLeakedGoroutines sells through every strategy (and loses a reentrant
// lock mid-sale, so its watchdog ends by loss rather than release), closes
// the pools and clients, and checks that no goroutine is left behind.
func TestNoLeakedGoroutines(t *testing.T) {
	// Start the shared servers first: their goroutines live for the binary.
	testenv.PostgresURL(t)
	testenv.RedisURL(t)
	ignore := goleak.IgnoreCurrent()

	t.Run("sell", func(t *testing.T) {
		e := newEnv(t)
		ctx := context.Background()
		for _, name := range inventory.Names() {
			id := "leak-" + name
			e.restock(t, id, 1)
			s := e.replica(t, name, "replica-a", time.Millisecond)
			if _, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: id}); err != nil {
				t.Errorf("%s: Sell(%q, 1) = %v, want a sale", name, id, err)
			}
			if _, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrSoldOut) {
				t.Errorf("%s: Sell(%q, 1) = %v, want ErrSoldOut", name, id, err)
			}
		}

		const id = "leak-lost"
		e.restock(t, id, 1)
		d := e.deps("replica-a")
		d.Lock = redislock.Options{Options: lock.Options{TTL: 150 * time.Millisecond, Wait: time.Second}}
		d.WorkDelay = 400 * time.Millisecond
		wait := sellAsync(e.seller(t, inventory.Reentrant, d), inventory.Order{ProductID: id, Quantity: 1})
		waitFor(t, "the lock to be held", 5*time.Second, func() bool { return e.rdb.Exists(ctx, redis.LockKey(id)).Val() == 1 })
		e.rdb.Del(ctx, redis.LockKey(id))
		if _, err := wait(); !errors.Is(err, inventory.ErrLockLost) {
			t.Errorf("Sell(%q, 1) with its lock deleted = %v, want ErrLockLost", id, err)
		}
	})
	// The subtest's cleanups closed every pool and client.
	testenv.NoLeaks(t, ignore)
}
