package stock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
)

// raceResult tallies one race run's answers.
type raceResult struct {
	ok, soldOut int
	byInstance  map[string]int
	others      []error
}

// race makes buyers orders of one unit of id, spread over workers goroutines
// that start together behind a closed channel, worker i selling through
// replicas[i % len(replicas)].
func race(t *testing.T, replicas []inventory.Seller, id string, buyers, workers int) raceResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	jobs := make(chan struct{}, buyers)
	for range buyers {
		jobs <- struct{}{}
	}
	close(jobs)
	start := make(chan struct{})
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		r  = raceResult{byInstance: map[string]int{}}
	)
	for w := range workers {
		seller := replicas[w%len(replicas)]
		wg.Go(func() {
			<-start
			for range jobs {
				sale, err := seller.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
				mu.Lock()
				switch {
				case err == nil:
					r.ok++
					r.byInstance[sale.Instance]++
				case errors.Is(err, inventory.ErrSoldOut):
					r.soldOut++
				default:
					r.others = append(r.others, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return r
}

// TestRace has two replicas of each strategy (own pools, own Redis clients,
// own instance names) sell 150 single units of a product stocked with 100,
// from 64 goroutines at once. Safe strategies must sell exactly 100; the
// unsafe ones, given a few milliseconds of work between check and write (and
// setnx a lock TTL shorter than that work), must be caught overselling. The ledger invariant holds for all of them.
func TestRace(t *testing.T) {
	t.Parallel()
	const (
		stock   = 100
		buyers  = 150
		workers = 64
		id      = "hot"
	)
	for _, info := range inventory.Strategies {
		t.Run(info.Name, func(t *testing.T) {
			e := newOwnEnv(t)
			// Work between check and write widens every race; the unsafe
			// strategies get enough of it that two replicas' reads overlap
			// on every sale, the safe ones some to prove it does not matter.
			delay := time.Millisecond
			if !info.Safe {
				delay = 5 * time.Millisecond
			}
			opts := testLock
			// A buyer may wait its turn as long as the race may last (its
			// context's 60 s): reentrant's 150 sales one at a time took
			// 10.7 s in a make test, and the last in line timed out at
			// testLock's 10 s. A lock timeout is the service's 503 for a
			// queue it cannot serve in time; this test is about what the
			// lock lets through, and counts every buyer's answer.
			opts.Wait = 50 * time.Second
			if info.Name == inventory.SetNX {
				// setnx fails only when a critical section outlives its
				// TTL (its doc says why): give it a TTL well below the
				// work. With testLock's 5s it excludes like a working
				// lock and sells exactly the stock.
				opts.TTL = delay / 5
			}
			replicas := []inventory.Seller{
				e.replicaWith(t, info.Name, "replica-a", opts, delay),
				e.replicaWith(t, info.Name, "replica-b", opts, delay),
			}
			// Each replica sells once first, so that both race with open
			// connections: a replica still connecting would leave the
			// whole race to the other (batch sells 100 in a few batches).
			for i, r := range replicas {
				e.restock(t, id, 1)
				if _, err := r.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1}); err != nil {
					t.Fatalf("warm-up sale on replica %d: %v", i+1, err)
				}
			}
			// An unsafe strategy oversells on almost every run here (it did
			// on every one of dozens tried); a run where the replicas' reads
			// happened not to overlap at the very end is retried, up to three
			// runs, each on a fresh round.
			runs := 1
			if !info.Safe {
				runs = 3
			}
			for run := 1; run <= runs; run++ {
				e.restock(t, id, stock)
				began := time.Now()
				r := race(t, replicas, id, buyers, workers)
				took := time.Since(began)
				p := e.checkLedger(t, id)
				t.Logf("%s run %d: %d sold, %d sold out, %d other errors, stock %d, ledger %d rows / %d units, %v (by instance %v)",
					info.Name, run, r.ok, r.soldOut, len(r.others), p.Quantity, p.Sales, p.Sold, took.Round(time.Millisecond), r.byInstance)

				for i, err := range r.others {
					if i == 3 {
						t.Errorf("... and %d more errors", len(r.others)-3)
						break
					}
					t.Errorf("Sell(%q, 1) = %v, want a sale or ErrSoldOut", id, err)
				}
				if int64(r.ok) != p.Sales || int64(r.ok) != p.Sold {
					t.Errorf("%d Sell calls succeeded, ledger has %d rows and %d units: want all equal", r.ok, p.Sales, p.Sold)
				}
				// A queueing strategy sells a replica's whole queue at once, so
				// one replica may take the race (handoff's holder re-takes the
				// lock while the other replica's waiter sleeps between polls).
				queueing := info.Name == inventory.Batch || info.Name == inventory.Handoff
				if len(r.byInstance) != 2 && !queueing {
					t.Errorf("sales by instance = %v, want both replicas selling", r.byInstance)
				}
				if info.Safe {
					if r.ok != stock || p.Quantity != 0 || r.soldOut != buyers-stock {
						t.Errorf("safe strategy %s: %d sold, %d sold out, stock %d; want %d sold, %d sold out, stock 0",
							info.Name, r.ok, r.soldOut, p.Quantity, stock, buyers-stock)
					}
					continue
				}
				if p.Quantity < 0 && p.Sold > stock {
					return
				}
				if run == runs {
					t.Errorf("unsafe strategy %s did not oversell in %d runs: last had stock %d, %d units sold of %d; want negative stock",
						info.Name, runs, p.Quantity, p.Sold, stock)
				}
			}
		})
	}
}

// TestLocalForgetsProducts checks that the local strategy's mutex map does
// not keep an entry per product id ever seen.
func TestLocalForgetsProducts(t *testing.T) {
	e := newEnv(t)
	s := newLocal(e.deps("local").build(t))
	e.restock(t, "kept", 1000)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, _ = s.Sell(ctx, inventory.Order{ProductID: fmt.Sprintf("random-%d", i), Quantity: 1})
			if _, err := s.Sell(ctx, inventory.Order{ProductID: "kept", Quantity: 1}); err != nil {
				t.Errorf("Sell(kept, 1) = %v, want a sale", err)
			}
		})
	}
	wg.Wait()
	if n := s.size(); n != 0 {
		t.Errorf("after every Sell returned, the local strategy holds %d mutexes, want 0", n)
	}
}
