package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
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

// TestHoldsSalesAndReturnsNeverOversell: for every safe strategy, two
// replicas sell, hold, cancel and leave holds to expire at once, while the
// expiry sweep runs beside them; once every hold has ended, Postgres shows
// no oversell, every returned order returned once, and initial - stock =
// units sold - units returned.
func TestHoldsSalesAndReturnsNeverOversell(t *testing.T) {
	t.Parallel()
	const (
		stock   = 20
		buyers  = 60
		workers = 16
		id      = "held-hot"
	)
	for _, info := range inventory.Strategies {
		if !info.Safe {
			continue
		}
		t.Run(info.Name, func(t *testing.T) {
			t.Parallel() // mostly waiting for deadlines: side by side
			e := newOwnEnv(t)
			opts := testLock
			opts.Wait = 30 * time.Second
			replicas := []inventory.Seller{
				e.replicaWith(t, info.Name, "replica-a", opts, 0),
				e.replicaWith(t, info.Name, "replica-b", opts, 0),
			}
			orders := Orders{Store: e.store, Returns: Restocker{Store: e.store, Redis: e.rdb}, Instance: "replica-a"}
			e.restock(t, id, stock)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			jobs := make(chan int, buyers)
			for i := range buyers {
				jobs <- i
			}
			close(jobs)
			start := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failures []error
			fail := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, err)
			}
			for w := range workers {
				seller := replicas[w%len(replicas)]
				wg.Go(func() {
					<-start
					for i := range jobs {
						o := inventory.Order{ProductID: id, Quantity: 1}
						if i%3 != 0 {
							o.PayWithin = time.Second // a hold: one in two is cancelled, the other expires
						}
						sale, err := seller.Sell(ctx, o)
						switch {
						case errors.Is(err, inventory.ErrSoldOut):
						case err != nil:
							fail(fmt.Errorf("Sell(%+v): %w", o, err))
						case i%3 == 1:
							if _, err := orders.Step(ctx, sale.OrderID, inventory.Cancel); err != nil {
								fail(fmt.Errorf("cancel %s: %w", sale.OrderID, err))
							}
						}
					}
				})
			}
			sweeping := make(chan struct{})
			var sweeper sync.WaitGroup
			sweeper.Go(func() {
				fence := lock.Fence{Backend: "test", Token: 1}
				for {
					if _, err := orders.Sweep(ctx, fence); err != nil {
						fail(fmt.Errorf("sweep: %w", err))
					}
					select {
					case <-sweeping:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			})
			close(start)
			wg.Wait()
			waitFor(t, "every hold to end", 20*time.Second, func() bool {
				held, _, err := e.store.HeldOrders(ctx)
				return err == nil && held == 0
			})
			close(sweeping)
			sweeper.Wait()
			for _, err := range failures {
				t.Error(err)
			}
			p := e.checkLedger(t, id)
			if p.Quantity < 0 || p.Quantity > stock {
				t.Errorf("stock %d after the run, want 0 to %d", p.Quantity, stock)
			}
			var twice, unreturned int
			if err := e.pool.QueryRow(ctx, `
				SELECT (SELECT count(*) FROM (SELECT order_id FROM returns GROUP BY order_id HAVING count(*) > 1) d),
				       (SELECT count(*) FROM orders o LEFT JOIN returns r ON r.order_id = o.id
				        WHERE (r.order_id IS NULL) = (o.state IN ('cancelled', 'expired', 'refunded')))`).Scan(&twice, &unreturned); err != nil {
				t.Fatal(err)
			}
			if twice != 0 || unreturned != 0 {
				t.Errorf("%d orders returned twice, %d orders whose return does not match their state", twice, unreturned)
			}
			t.Logf("stock %d, %d sold, %d returned", p.Quantity, p.Sold, p.Returned)
		})
	}
}
