package stock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

// shortLease is the reservation lease of the lease tests: short enough
// that a dead holder's units come back within a test, long enough that
// the renewals of a live one, every third of it, keep it on a busy machine.
const shortLease = 300 * time.Millisecond

// luaWithLease is a lua seller with the given reservation lease.
func luaWithLease(t *testing.T, e *env, instance string, lease time.Duration) *lua {
	s := newLua(e.deps(instance).build(t))
	s.lease = lease
	return s
}

// TestLuaDeadBuyerStrandsNothing: a replica reserves the last unit and dies
// before its Postgres write (its reservation is left in Redis, nobody gives
// it back). A buyer at another replica waits for that reservation, and gets
// the unit once its lease has run out. Before leases, the unit stayed taken
// until the counter's TTL (a minute) reloaded it, answering "sold out" with
// stock in Postgres all along.
func TestLuaDeadBuyerStrandsNothing(t *testing.T) {
	e := newEnv(t)
	const id = "stranded"
	e.restock(t, id, 1)
	s := luaWithLease(t, e, "replica-b", shortLease)
	ctx := context.Background()
	if err := s.seed(ctx, id); err != nil {
		t.Fatalf("load the counter: %v", err)
	}
	dead := inventory.Order{ProductID: id, Quantity: 1}
	if status, _, err := redis.NewCounter(e.rdb).Reserve(ctx, dead, "dead-replica", shortLease); err != nil || status != redis.Reserved {
		t.Fatalf("reserve the last unit as the replica that dies = status %d, %v; want reserved", status, err)
	}
	// The unit is in flight, so "sold out" would not be true yet: the buyer
	// waits for the reservation's outcome, and once its lease has run out
	// the unit is given back and sold to this buyer.
	sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
	if err != nil || sale.Remaining != 0 {
		t.Fatalf("Sell(%q, 1) while the dead replica's lease runs = %+v, %v; want the unit once its lease ran out", id, sale, err)
	}
	if _, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrSoldOut) {
		t.Errorf("Sell(%q, 1) after that = %v, want ErrSoldOut", id, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sales != 1 {
		t.Errorf("stock %d, %d ledger rows; want 0 and 1", p.Quantity, p.Sales)
	}
	if n, err := counterLeft(e, id); err != nil || n != 0 {
		t.Errorf("counter %s = %d, %v; want 0 (the unit given back once, then sold)", redis.CounterKey(id), n, err)
	}
}

// TestLuaUnknownOutcomeDoesNotBlockItsKey: an order with an idempotency key
// reserved its units and then its replica stopped (died, or answered
// outcome-unknown and went on to other work) without a Postgres write. The
// buyer's retry with the same key waits for that reservation's outcome,
// which is decided when its lease runs out: the retry sells, once, well
// within its wait budget. Before leases, the in-flight marker held the key
// for five minutes, and every retry got 503 after its whole wait.
func TestLuaUnknownOutcomeDoesNotBlockItsKey(t *testing.T) {
	e := newEnv(t)
	const id = "unknown-outcome"
	e.restock(t, id, 5)
	s := luaWithLease(t, e, "replica-b", shortLease)
	ctx := context.Background()
	if err := s.seed(ctx, id); err != nil {
		t.Fatalf("load the counter: %v", err)
	}
	o := inventory.Order{ProductID: id, Quantity: 2, IdempotencyKey: "order-unknown"}
	if status, _, err := redis.NewCounter(e.rdb).Reserve(ctx, o, "first-try", shortLease); err != nil || status != redis.Reserved {
		t.Fatalf("reserve as the first try = status %d, %v; want reserved", status, err)
	}
	keyed := replaying{store: e.store, next: s} // as New wraps it: a retry's replay is the ledger's
	sale, err := keyed.Sell(ctx, o)
	if err != nil || sale.Replayed || sale.Remaining != 3 {
		t.Fatalf("retry Sell(%+v) = %+v, %v; want a new sale leaving 3", o, sale, err)
	}
	if again, err := keyed.Sell(ctx, o); err != nil || !again.Replayed || again.ID != sale.ID {
		t.Errorf("second retry Sell(%+v) = %+v, %v; want the replay of sale %d", o, again, err, sale.ID)
	}
	if p := e.checkLedger(t, id); p.Quantity != 3 || p.Sales != 1 {
		t.Errorf("stock %d, %d ledger rows; want 3 and 1", p.Quantity, p.Sales)
	}
	if n, err := counterLeft(e, id); err != nil || n != 3 {
		t.Errorf("counter %s = %d, %v; want 3 (the first try's units back, the retry's sold)", redis.CounterKey(id), n, err)
	}
}

// TestLuaLiveBuyerKeepsItsLease: a sale that takes several leases' time
// (its work) renews its reservation, so a buyer at another replica is not
// handed the unit in flight (it waits, and is told sold out once the sale
// commits), and the counter ends at what Postgres holds, not one above it.
func TestLuaLiveBuyerKeepsItsLease(t *testing.T) {
	e := newEnv(t)
	const id = "slow-buyer"
	e.restock(t, id, 1)
	da := e.deps("replica-a")
	da.WorkDelay = 4 * shortLease
	a := newLua(da.build(t))
	a.lease = shortLease
	b := luaWithLease(t, e, "replica-b", shortLease)
	ctx := context.Background()

	waitA := sellAsync(a, inventory.Order{ProductID: id, Quantity: 1})
	var first float64
	waitFor(t, "replica a to reserve the last unit", 5*time.Second, func() bool {
		z, err := e.rdb.ZRangeWithScores(ctx, redis.LeasesKey(id), 0, -1).Result()
		if err != nil || len(z) != 1 {
			return false
		}
		first = z[0].Score
		return true
	})
	waitFor(t, "replica a to renew its lease past its first expiry", 10*time.Second, func() bool {
		z, err := e.rdb.ZRangeWithScores(ctx, redis.LeasesKey(id), 0, -1).Result()
		return err == nil && len(z) == 1 && z[0].Score > first+float64(shortLease.Milliseconds())
	})
	// b waits for a's outcome rather than say "sold out" while the unit is
	// in flight; a commits, so b's answer is sold out (true by then).
	if _, err := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrSoldOut) {
		t.Errorf("Sell(%q, 1) at b while a's renewed reservation holds the unit = %v, want ErrSoldOut once a sold it", id, err)
	}
	if _, err := waitA(); err != nil {
		t.Fatalf("Sell(%q, 1) at a = %v, want the sale", id, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sales != 1 {
		t.Errorf("stock %d, %d ledger rows; want 0 and 1", p.Quantity, p.Sales)
	}
	if n, err := counterLeft(e, id); err != nil || n != 0 {
		t.Errorf("counter %s = %d, %v; want 0", redis.CounterKey(id), n, err)
	}
	if n, err := e.rdb.ZCard(ctx, redis.LeasesKey(id)).Result(); err != nil || n != 0 {
		t.Errorf("ZCARD %s after a's commit = %d, %v; want 0 (the lease settled)", redis.LeasesKey(id), n, err)
	}
}

// TestLuaSoldOutOnlyWhenTrue: the last unit is reserved by a sale in flight
// whose Postgres write then fails (its units go back). A buyer who asked
// meanwhile must not have been told "sold out": Postgres had the unit all
// along. It waits for the reservation's outcome and gets the unit. (The
// history checker found lua's false sold-outs under strategy-switch.)
func TestLuaSoldOutOnlyWhenTrue(t *testing.T) {
	e := newEnv(t)
	const id = "in-flight"
	e.restock(t, id, 1)
	s := luaWithLease(t, e, "replica-b", reservationLease)
	ctx := context.Background()
	if err := s.seed(ctx, id); err != nil {
		t.Fatal(err)
	}
	other := inventory.Order{ProductID: id, Quantity: 1}
	if status, _, err := redis.NewCounter(e.rdb).Reserve(ctx, other, "failing-sale", reservationLease); err != nil || status != redis.Reserved {
		t.Fatalf("reserve the last unit for a sale in flight = %d, %v", status, err)
	}
	calls := func() int64 {
		info, _ := e.rdb.Info(ctx, "commandstats").Result()
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha:") {
				var n int64
				fmt.Sscanf(strings.TrimPrefix(line, "cmdstat_evalsha:"), "calls=%d", &n)
				return n
			}
		}
		return 0
	}
	before := calls()
	buyer := sellAsync(s, inventory.Order{ProductID: id, Quantity: 1})
	testenv.WaitFor(t, "the buyer to have tried the counter", 10*time.Second, func() bool { return calls() > before })
	// The sale in flight fails: its unit goes back.
	if err := s.giveBack(ctx, other, "failing-sale"); err != nil {
		t.Fatal(err)
	}
	if sale, err := buyer(); err != nil || sale.Remaining != 0 {
		t.Errorf("Sell(%q, 1) asked while the unit was reserved by a sale that then failed = %+v, %v; want the unit (it was never sold out)", id, sale, err)
	}
}

// TestLuaStaleCounterIsNotSoldOut: a counter that says fewer units than
// Postgres has is stale, however it came to be: a seed that read Postgres
// (round 1, nothing left) before a restock ran its script after the
// restock's DEL and loaded the old round's 0 for a minute; or a counter of
// the right round that a failed DEL, a failover or a restore left too low.
// Each time Postgres has the units, and the order must get them, not a
// "sold out" from Redis.
func TestLuaStaleCounterIsNotSoldOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newLua(e.deps("replica-a").build(t))
	load := func(id string, units, round int64) {
		t.Helper()
		if err := redis.NewCounter(e.rdb).Seed(ctx, id, units, int(round)); err != nil {
			t.Fatalf("load %s with %d units of round %d: %v", redis.CounterKey(id), units, round, err)
		}
	}
	cases := []struct {
		name             string
		stale            func(id string)
		order, remaining int64
	}{
		{"an older round's empty counter loaded after the restock", func(id string) {
			e.restock(t, id, 0)   // round 1, sold out
			e.restock(t, id, 100) // round 2: its DEL found no counter
			load(id, 0, 1)        // the late seed of round 1
		}, 1, 99},
		{"this round's counter too low", func(id string) {
			e.restock(t, id, 100)
			load(id, 1, 1)
		}, 5, 95},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("lua-stale-%d", i)
			c.stale(id)
			o := inventory.Order{ProductID: id, Quantity: c.order}
			for n := range 3 {
				sale, err := s.Sell(ctx, o)
				if err != nil || sale.Remaining != c.remaining-int64(n)*c.order {
					t.Fatalf("Sell(%s) #%d with a stale counter = %+v, %v; want a sale leaving %d", formatOrder(o), n+1, sale, err, c.remaining-int64(n)*c.order)
				}
			}
			e.checkLedger(t, id)
		})
	}
}
