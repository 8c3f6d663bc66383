package stock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/redis"
)

// TestAReturnIsTrueOnEveryReplicaBeforeItsAnswer: a hold takes the last
// unit and both replicas remember the product sold out (for a minute);
// once a cancel through one replica has been answered, neither answers
// "sold out" from memory, and the unit sells again at once on the other.
func TestAReturnIsTrueOnEveryReplicaBeforeItsAnswer(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	var listening sync.WaitGroup
	t.Cleanup(func() { cancel(); listening.Wait() })
	const id = "returned-everywhere"
	type replica struct {
		marks  *SoldOut
		seller inventory.Seller
		orders Orders
	}
	var replicas []replica
	for _, name := range []string{"replica-a", "replica-b"} {
		marks := NewSoldOut(time.Minute, e.store, name)
		d := e.deps(name)
		d.Redis = e.newRedis(t)
		listening.Go(func() { marks.Listen(ctx, d.Redis, slog.New(slog.DiscardHandler)) })
		orders := Orders{Store: e.store, Returns: Restocker{Store: e.store, Redis: d.Redis, Marks: marks}, Instance: name}
		replicas = append(replicas, replica{marks, marks.Wrap(e.seller(t, inventory.Atomic, d)), orders})
	}
	a, b := replicas[0], replicas[1]
	waitFor(t, "both replicas to subscribe to the announcements", 10*time.Second, func() bool {
		n, err := e.announcementSubscribers(ctx)
		return err == nil && n[redis.RestockChannel] == 2 && n[redis.SoldOutChannel] == 2
	})
	e.restock(t, id, 1)
	waitFor(t, "both replicas to hear of round 1", 10*time.Second, func() bool {
		return heardRound(a.marks, id) == 1 && heardRound(b.marks, id) == 1
	})
	held, err := a.seller.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1, PayWithin: time.Minute})
	if err != nil || held.OrderID == "" || held.Remaining != 0 {
		t.Fatalf("the hold of the last unit = %+v, %v", held, err)
	}
	waitFor(t, "the sell-out to be marked on both replicas", 10*time.Second, func() bool { return a.marks.Marked(id) && b.marks.Marked(id) })
	one := inventory.Order{ProductID: id, Quantity: 1}
	if _, err := b.seller.Sell(ctx, one); !errors.Is(err, inventory.ErrSoldOut) {
		t.Fatalf("Sell on b before the cancel = %v, want ErrSoldOut", err)
	}

	if r, err := a.orders.Step(ctx, held.OrderID, inventory.Cancel); err != nil || r.State != inventory.Cancelled {
		t.Fatalf("cancel through a = %s, %v", r.State, err)
	}
	// No wait: the cancel's answer came after every replica forgot.
	if a.marks.Marked(id) || b.marks.Marked(id) {
		t.Errorf("right after the cancel was answered: marked on a %v, on b %v; want neither", a.marks.Marked(id), b.marks.Marked(id))
	}
	if sale, err := b.seller.Sell(ctx, one); err != nil || sale.Remaining != 0 {
		t.Errorf("Sell on b right after the cancel = %+v, %v; want the returned unit", sale, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 || p.Returned != 1 {
		t.Errorf("after the cancel and the sale: %+v; want stock 0, 1 returned", p)
	}
}

// TestLuaSellsAReturnedUnit: lua's counter says 0 after a hold of the last
// unit; the unit returned by a cancel is sold by lua at once (it asks
// Postgres before it answers "sold out").
func TestLuaSellsAReturnedUnit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const id = "lua-returned"
	e.restock(t, id, 1)
	s := e.seller(t, inventory.Lua, e.deps("replica-a"))
	held, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1, PayWithin: time.Minute})
	if err != nil || held.OrderID == "" {
		t.Fatalf("lua's hold of the last unit = %+v, %v", held, err)
	}
	one := inventory.Order{ProductID: id, Quantity: 1}
	if _, err := s.Sell(ctx, one); !errors.Is(err, inventory.ErrSoldOut) {
		t.Fatalf("lua's sale after the hold = %v, want ErrSoldOut", err)
	}
	orders := Orders{Store: e.store, Returns: Restocker{Store: e.store, Redis: e.rdb}, Instance: "replica-a"}
	if _, err := orders.Step(ctx, held.OrderID, inventory.Cancel); err != nil {
		t.Fatal(err)
	}
	if sale, err := s.Sell(ctx, one); err != nil {
		t.Errorf("lua's sale after the cancel = %+v, %v; want the returned unit", sale, err)
	}
	e.checkLedger(t, id)
}
