package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/redis"
)

// TestSetNXOversellsWhenTheSectionOutlivesTheTTL: one unit left, buyer 1
// on replica a takes setnx's lock and starts its work; the lock key
// expires while it works (TTL 50ms, work 1s), buyer 2 on replica b then
// takes the lock, reads the same unit, and both sell it: stock -1, two
// ledger rows. The control run, with a TTL longer than the work, makes
// buyer 2 wait and be told sold out — the naive lock only fails once a
// critical section outlives its TTL.
func TestSetNXOversellsWhenTheSectionOutlivesTheTTL(t *testing.T) {
	const work = time.Second
	for _, c := range []struct {
		ttl      time.Duration
		oversell bool
	}{{50 * time.Millisecond, true}, {10 * time.Second, false}} {
		t.Run("ttl="+c.ttl.String(), func(t *testing.T) {
			e := newEnv(t)
			opts := redislock.Options{Options: lock.Options{TTL: c.ttl, Wait: 10 * time.Second}, MaxBackoff: 8 * time.Millisecond}
			a := e.replicaWith(t, inventory.SetNX, "replica-a", opts, work)
			b := e.replicaWith(t, inventory.SetNX, "replica-b", opts, work)
			const id = "setnx-last-unit"
			e.restock(t, id, 1)
			o := inventory.Order{ProductID: id, Quantity: 1}
			ctx := context.Background()

			wait1 := sellAsync(a, o)
			waitFor(t, "buyer 1 to hold the lock", 5*time.Second, func() bool {
				n, err := e.rdb.Exists(ctx, redis.SetNXKey(id)).Result()
				return err == nil && n == 1
			})
			if c.oversell {
				waitFor(t, "the lock key to expire under buyer 1", 5*time.Second, func() bool {
					n, err := e.rdb.Exists(ctx, redis.SetNXKey(id)).Result()
					return err == nil && n == 0
				})
			}
			sale2, err2 := b.Sell(ctx, o)
			sale1, err1 := wait1()
			p := e.product(t, id)
			t.Logf("TTL %v, work %v: buyer 1 = %+v, %v; buyer 2 = %+v, %v; stock %d, ledger %d rows", c.ttl, work, sale1, err1, sale2, err2, p.Quantity, p.Sales)
			if err1 != nil {
				t.Errorf("buyer 1: Sell(%s) = %v, want a sale", formatOrder(o), err1)
			}
			if c.oversell {
				if err2 != nil || p.Quantity != -1 || p.Sales != 2 {
					t.Errorf("buyer 2 after the lock expired under buyer 1: Sell = %v; stock %d, ledger %d rows; want a second sale of the one unit: stock -1, 2 rows", err2, p.Quantity, p.Sales)
				}
				return
			}
			if !errors.Is(err2, inventory.ErrSoldOut) || p.Quantity != 0 || p.Sales != 1 {
				t.Errorf("buyer 2 with the TTL longer than the work: Sell = %v; stock %d, ledger %d rows; want ErrSoldOut, stock 0, 1 row", err2, p.Quantity, p.Sales)
			}
		})
	}
}

// TestARestockClearsTheSetNXKey: a setnx key left behind (here with no
// TTL, as a holder that died between SETNX and PEXPIRE leaves it) does not
// outlive a restock: the next setnx sale sells at once.
func TestARestockClearsTheSetNXKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const id = "setnx-wedged"
	e.restock(t, id, 1)
	if err := e.rdb.Set(ctx, redis.SetNXKey(id), 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	e.restock(t, id, 1)
	if n, err := e.rdb.Exists(ctx, redis.SetNXKey(id)).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after the restock = %d, %v; want 0", redis.SetNXKey(id), n, err)
	}
	if _, err := e.seller(t, inventory.SetNX, e.deps("replica-a")).Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil {
		t.Errorf("setnx Sell after the restock = %v, want the unit", err)
	}
}
