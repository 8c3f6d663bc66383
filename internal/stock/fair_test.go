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

// fairHolderKey is the fair lock's holder key for product id (see redislock.Fair).
func fairHolderKey(id string) string { return redis.LockKey(id) + ":fair" }

// TestFairLockLost deletes the fair lock's holder key while replica a is
// inside its critical section, and lets replica b take the lock and sell
// meanwhile. With a short TTL a's watchdog notices within TTL/3: a fails
// with ErrLockLost and rolls back, and only b sells. With a long TTL no
// renewal comes before a finishes; a claimed the stock row with its fencing
// token before b, so b waits for a's commit and sells after it. Either way:
// no oversell, the ledger matches.
func TestFairLockLost(t *testing.T) {
	cases := []struct {
		name      string
		ttl       time.Duration
		wantA     error
		wantStock int64
		wantRows  int64
	}{
		{"watchdog notices", 300 * time.Millisecond, inventory.ErrLockLost, 8, 1},
		{"the row claim orders them", 30 * time.Second, nil, 7, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const id = "fair-fault"
			e.restock(t, id, 10)
			da := e.deps("replica-a")
			da.Lock = redislock.Options{Options: lock.Options{TTL: c.ttl, Wait: 2 * time.Second}}
			da.WorkDelay = 700 * time.Millisecond
			a := e.seller(t, inventory.Fair, da)
			b := e.replica(t, inventory.Fair, "replica-b", 0)
			ctx := context.Background()

			waitA := sellAsync(a, inventory.Order{ProductID: id, Quantity: 1})
			waitClaimed(t, e) // the key alone is there before a's Lock returns
			if err := e.rdb.Del(ctx, fairHolderKey(id)).Err(); err != nil {
				t.Fatalf("DEL %s: %v", fairHolderKey(id), err)
			}
			saleB, errB := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 2})
			saleA, errA := waitA()

			if !errors.Is(errA, c.wantA) || (c.wantA == nil && errA != nil) {
				t.Errorf("replica a: Sell(%q, 1) after its lock was deleted = %+v, %v; want %v", id, saleA, errA, c.wantA)
			}
			if errA == nil && saleA.ID >= saleB.ID {
				t.Errorf("replica a's sale %d is not ordered before b's %d, though a claimed the row first", saleA.ID, saleB.ID)
			}
			if errB != nil {
				t.Fatalf("replica b: Sell(%q, 2) after a's lock was deleted = %v, want a sale", id, errB)
			}
			p := e.checkLedger(t, id)
			if p.Quantity != c.wantStock || p.Sales != c.wantRows {
				t.Errorf("after the fault: stock %d, %d ledger rows; want %d and %d", p.Quantity, p.Sales, c.wantStock, c.wantRows)
			}
			if saleB.Fence <= 0 {
				t.Errorf("replica b's sale has fence %d, want a positive fencing token", saleB.Fence)
			}
		})
	}
}

// TestFairSellsInArrivalOrder: buyers who queued one after another (each
// seen in the lock's queue before the next comes), on two replicas, sell
// in that order.
func TestFairSellsInArrivalOrder(t *testing.T) {
	e := newEnv(t)
	const id, n = "fair-fifo", 6
	e.restock(t, id, 100)
	replicas := []inventory.Seller{e.replica(t, inventory.Fair, "replica-a", 0), e.replica(t, inventory.Fair, "replica-b", 0)}
	ctx := context.Background()
	holder := redislock.NewFair(e.rdb, redislock.Options{})
	t.Cleanup(holder.Close)
	held, err := holder.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("holder Lock = %v", err)
	}
	waits := make([]func() (inventory.Sale, error), n)
	for i := range n {
		waits[i] = sellAsync(replicas[i%2], inventory.Order{ProductID: id, Quantity: 1})
		waitFor(t, "buyer to queue", 5*time.Second, func() bool {
			return e.rdb.ZCard(ctx, redis.LockKey(id)+":fair:queue").Val() == int64(i+1)
		})
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("holder Release = %v", err)
	}
	var last inventory.Sale
	for i, wait := range waits {
		sale, err := wait()
		if err != nil {
			t.Fatalf("buyer %d: Sell = %v", i, err)
		}
		if sale.ID <= last.ID || sale.Fence <= last.Fence {
			t.Errorf("buyer %d: sale %d with fence %d after buyer %d's sale %d with fence %d; want them in arrival order",
				i, sale.ID, sale.Fence, i-1, last.ID, last.Fence)
		}
		last = sale
	}
	if p := e.checkLedger(t, id); p.Quantity != 100-n {
		t.Errorf("stock %d, want %d", p.Quantity, 100-n)
	}
}

// TestFairFenceSurvivesRedisLoss: after Redis loses every key, the next
// fencing token still starts above the highest one Postgres has seen
// (its redislock/fair fence).
func TestFairFenceSurvivesRedisLoss(t *testing.T) {
	e := newEnv(t)
	const id = "fair-amnesia"
	e.restock(t, id, 10)
	s := e.seller(t, inventory.Fair, e.deps("replica-a"))
	ctx := context.Background()
	var last int64
	for i := range 3 {
		sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		if err != nil {
			t.Fatalf("sale %d: Sell(%q, 1) = %v", i+1, id, err)
		}
		if sale.Fence <= last {
			t.Errorf("sale %d (Redis flushed before it: %v): fence %d, want more than %d", i+1, i > 0, sale.Fence, last)
		}
		last = sale.Fence
		if err := e.rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
	}
	if f, err := e.store.Fence(ctx, redislock.FairBackend, id); err != nil || f != last {
		t.Errorf("fence redislock/fair = %d, %v; want %d, the last sale's", f, err, last)
	}
}
