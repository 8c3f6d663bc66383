package stock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// TestOptimisticSellsTheCrowd is the seeds' crowd on two replicas of
// optimistic sharing one Postgres: many more buyers than units, all at
// once. Every unit must be sold, no buyer may be turned away with
// ErrContention (503) while units remain, and the ledger must match the
// sales the buyers were told of.
//
// It also checks that a replica's buyers of one product take turns: an
// attempt loses its compare-and-set only when a sale committed between its
// read and its write, and with one attempt at a time per replica that sale
// was the other replica's, which can fail at most the one attempt the
// first replica has in flight. So the conflicts are at most the units
// sold. Without the turns every buyer in flight attempted at once and all
// but one lost each round, thousands of conflicts for these units, and the
// losers' growing backoff could run a crowd out of its budget with units
// still unsold (issue 38: 27 of 1,000 units left, 527 503s, in one of four
// fleet runs).
func TestOptimisticSellsTheCrowd(t *testing.T) {
	const (
		units  = 400
		buyers = 600 // per replica: 1,200 in all, 3 for every unit
		id     = "crowd"
	)
	e := newOwnEnv(t)
	e.restock(t, id, units)
	var conflicts atomic.Int64
	replica := func(instance string) inventory.Seller {
		return e.seller(t, inventory.Optimistic, testDeps{Deps: Deps{
			Store:    postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{}),
			Redis:    e.newRedis(t),
			Instance: instance,
			// The fleet's defaults (the seeds' scenario ran with them):
			// 2 ms of work between read and write, backoff from 1 to
			// 32 ms; but a budget no buyer reaches even on a machine
			// busy with other tests (the fleet's 10 s ran out there for
			// the last of 600 buyers in line: make test, 347 of 400 sold
			// in 10.8 s). How long a crowd takes is not what this test
			// asks (TestOptimisticBudgetCoversTheTurn checks the
			// budget); the conflicts are.
			WorkDelay:  2 * time.Millisecond,
			Wait:       2 * time.Minute,
			MinBackoff: time.Millisecond,
			MaxBackoff: 32 * time.Millisecond,
			OnConflict: func() { conflicts.Add(1) },
		}, Lock: testLock})
	}
	replicas := []inventory.Seller{replica("replica-a"), replica("replica-b")}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tl := newTally()
	start := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for i := range 2 * buyers {
		s := replicas[i%2]
		wg.Go(func() {
			<-start
			sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
			tl.add("Sell(ctx, "+id+", 1)", sale, err)
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d buyers on 2 replicas for %d units in %v: %s; %d compare-and-set conflicts",
		2*buyers, units, time.Since(began).Round(time.Millisecond), tl, conflicts.Load())
	tl.report(t, "the crowd")

	if n := tl.count("sold"); n != units {
		t.Errorf("%d of %d buyers bought a unit, want all %d units sold", n, 2*buyers, units)
	}
	// Every unit sold: a buyer told 503 was turned away while units
	// remained, or ran out of its budget in line behind the sell-out.
	if n := tl.count("503 contention"); n > 0 {
		t.Errorf("%d buyers got ErrContention (503), want none: %d units for %d buyers, a 2 min budget", n, units, 2*buyers)
	}
	if n := tl.count("sold-out"); n != 2*buyers-units {
		t.Errorf("%d buyers got ErrSoldOut, want the %d who came after the last unit", n, 2*buyers-units)
	}
	if n := conflicts.Load(); n > units {
		t.Errorf("%d compare-and-set conflicts for %d units sold, want at most %d: one attempt at a time per replica loses only to the other replica's sales",
			n, units, units)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 {
		t.Errorf("%q has %d units left after the crowd, want 0", id, p.Quantity)
	}
	e.checkSafety(t, "the crowd", id, tl.sales)
}

// TestOptimisticBudgetCoversTheTurn: a buyer waiting for its turn behind a
// long attempt of the same replica gives up with ErrContention when its
// Deps.Wait budget ends, while that attempt is still in flight, and sells
// nothing; the first buyer's sale goes through.
func TestOptimisticBudgetCoversTheTurn(t *testing.T) {
	e := newEnv(t)
	const id = "turn-budget"
	e.restock(t, id, 5)
	d := e.deps("replica-a")
	d.WorkDelay = 2 * time.Second // the first buyer's attempt
	d.Wait = 200 * time.Millisecond
	s := newOptimistic(d.build(t))
	ctx := context.Background()

	type answer struct {
		sale inventory.Sale
		err  error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		first <- answer{sale, err}
	}()
	// The first buyer holds the product's turn, inside its attempt's
	// work (its transaction has read and is idle), before the second asks.
	waitFor(t, "the first buyer to be inside its attempt", 10*time.Second, func() bool {
		var n int
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`).Scan(&n)
		return err == nil && n == 1
	})
	go func() {
		sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		second <- answer{sale, err}
	}()

	var got answer
	select {
	case got = <-second:
	case a := <-first:
		t.Fatalf("the first buyer's Sell(%q, 1) = %+v, %v returned before the second buyer's; want the second to give up in line first, at its 200ms budget",
			id, a.sale, a.err)
	}
	if !errors.Is(got.err, inventory.ErrContention) {
		t.Errorf("second Sell(%q, 1) in line behind a 2s attempt with a 200ms budget = %+v, %v; want ErrContention", id, got.sale, got.err)
	}
	if a := <-first; a.err != nil {
		t.Errorf("first Sell(%q, 1) = %v, want a sale", id, a.err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 4 || p.Sales != 1 {
		t.Errorf("%q: %d units left in %d sales, want 4 left, 1 sale", id, p.Quantity, p.Sales)
	}
}
