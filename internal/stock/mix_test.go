package stock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/inventory"
)

// pairReferences are one safe strategy of each kind of state a strategy
// may keep beside Postgres's row: none (atomic: a guarded UPDATE), a Redis
// counter (lua) and a lock's fencing counter (redis).
var pairReferences = []string{inventory.Atomic, inventory.Lua, inventory.RedisLock}

// pairSample is how many further ordered pairs of safe strategies each
// run of TestOrderedPairsOfSafeStrategies draws at random.
const pairSample = 12

// TestOrderedPairsOfSafeStrategies sells one product by two safe
// strategies in turn, on two replicas: for an ordered pair (A, B) of
// distinct safe strategies, with 2 in stock, A sells 1, B sells 1, and A
// is then sold out. A strategy that keeps state of its own (lua's Redis
// counter, a lock's fencing counter) must not trust it over what another
// strategy did in Postgres meanwhile; e.g. lua, atomic, lua: lua's counter
// still says 1 left when atomic has sold the last unit.
//
// Every safe strategy is paired both ways with each of pairReferences,
// which grows with the number of strategies, not its square; and pairSample
// further pairs are drawn from all the others with a seed the test prints
// (INVENTORY_TEST_SEED replays it), so that over many runs every pair is
// tried.
func TestOrderedPairsOfSafeStrategies(t *testing.T) {
	names := safeNames()
	if len(names) < 2 {
		t.Fatalf("safe strategies %v: want at least two to pair", names)
	}
	pairs, seed := orderedPairs(t, names)
	t.Logf("%d of %d ordered pairs: every strategy with %v both ways, and %d drawn with seed %d (INVENTORY_TEST_SEED=%d replays them)",
		len(pairs), len(names)*(len(names)-1), pairReferences, pairSample, seed, seed)
	sellPairs(t, newEnv(t), pairs)
}

// sellPairs sells each ordered pair of strategies in turn on two replicas
// of e, as TestOrderedPairsOfSafeStrategies says.
func sellPairs(t *testing.T, e *env, pairs [][2]string) {
	a := e.safeReplica(t, "replica-a", "", testDeps{Lock: testLock})
	b := e.safeReplica(t, "replica-b", "", testDeps{Lock: testLock})
	ctx := context.Background()
	for _, pair := range pairs {
		first, second := pair[0], pair[1]
		t.Run(first+"_then_"+second, func(t *testing.T) {
			id := "pair-" + first + "-" + second
			e.restock(t, id, 2)
			steps := []struct {
				strategy  string
				seller    inventory.Seller
				want      error // nil: a sale leaving remaining
				remaining int64
			}{
				{first, a[first], nil, 1},
				{second, b[second], nil, 0},
				{first, a[first], inventory.ErrSoldOut, 0},
			}
			var sales []inventory.Sale
			after := "nothing"
			for i, s := range steps {
				o := inventory.Order{ProductID: id, Quantity: 1}
				sale, err := s.seller.Sell(ctx, o)
				call := fmt.Sprintf("step %d: Sell(ctx, %s) with %s after %s", i+1, formatOrder(o), s.strategy, after)
				if i == 0 {
					after = s.strategy
				} else {
					after += ", " + s.strategy
				}
				if s.want != nil {
					if !errors.Is(err, s.want) {
						t.Errorf("%s = %+v, %v; want %v", call, sale, err, s.want)
					}
					if errors.Is(err, inventory.ErrLockBreach) {
						t.Logf("%s: lock breach caught by Postgres: %v", call, err)
					}
					if err == nil {
						sales = append(sales, sale)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s = %v, want a sale leaving %d", call, err, s.remaining)
					continue
				}
				sales = append(sales, sale)
				if sale.Remaining != s.remaining || sale.Strategy != s.strategy || sale.Round != 1 || sale.Replayed {
					t.Errorf("%s = %d remaining, strategy %q, round %d, replayed %v; want %d remaining, strategy %q, round 1, a fresh sale",
						call, sale.Remaining, sale.Strategy, sale.Round, sale.Replayed, s.remaining, s.strategy)
				}
			}
			e.checkSafety(t, first+" then "+second, id, sales)
			if p := e.product(t, id); p.Quantity != 0 || p.Sales != 2 || p.Sold != 2 {
				t.Errorf("after %s, %s, %s on 2 in stock: quantity %d, ledger %d rows / %d units; want 0, 2 / 2",
					first, second, first, p.Quantity, p.Sales, p.Sold)
			}
		})
	}
}

// orderedPairs is every pair of names with a reference (pairReferences)
// on either side, then pairSample of the other pairs, drawn with the seed
// INVENTORY_TEST_SEED gives or else a new one; and that seed.
func orderedPairs(t *testing.T, names []string) ([][2]string, int64) {
	t.Helper()
	seed := time.Now().UnixNano() % 1_000_000
	if v := os.Getenv("INVENTORY_TEST_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("INVENTORY_TEST_SEED=%q: %v", v, err)
		}
		seed = n
	}
	var pairs, others [][2]string
	for _, first := range names {
		for _, second := range names {
			switch {
			case first == second:
			case slices.Contains(pairReferences, first) || slices.Contains(pairReferences, second):
				pairs = append(pairs, [2]string{first, second})
			default:
				others = append(others, [2]string{first, second})
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	return append(pairs, others[:min(pairSample, len(others))]...), seed
}

// buyerResult is one buyer's Sell: when it began and returned, and its answer.
type buyerResult struct {
	began, ended time.Time
	sale         inventory.Sale
	err          error
}

// mixBuyers has buyers single-unit buyers, workers at a time behind a start
// gate, sell product id; buyer i uses strategy names[i%len(names)] on
// replica (i/len(names))%len(replicas), so every strategy sells from every
// replica. afterEach, when set, runs after each buyer returns, with the
// number returned so far. It returns the tally and each buyer's result.
func mixBuyers(replicas []map[string]inventory.Seller, names []string, id string, buyers, workers int, afterEach func(returned int64)) (*tally, []buyerResult) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	jobs := make(chan int, buyers)
	for i := range buyers {
		jobs <- i
	}
	close(jobs)
	start := make(chan struct{})
	tl := newTally()
	results := make([]buyerResult, buyers)
	var (
		returned atomic.Int64
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			<-start
			for i := range jobs {
				name := names[i%len(names)]
				replica := (i / len(names)) % len(replicas)
				o := inventory.Order{ProductID: id, Quantity: 1}
				began := time.Now()
				sale, err := replicas[replica][name].Sell(ctx, o)
				results[i] = buyerResult{began: began, ended: time.Now(), sale: sale, err: err}
				tl.add(fmt.Sprintf("buyer %d: Sell(ctx, %s) with %s on replica %d", i, formatOrder(o), name, replica), sale, err)
				n := returned.Add(1)
				if afterEach != nil {
					afterEach(n)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return tl, results
}

// TestAllSafeStrategiesAtOnce has every safe strategy sell one product at
// the same time from two replicas: 450 buyers for 300 units, 64 at a time.
// Exactly 300 must sell, and every other buyer be told sold out (or get a
// 503-class answer); the invariants hold in Postgres.
func TestAllSafeStrategiesAtOnce(t *testing.T) { allAtOnce(t, newEnv(t), safeNames()) }

// allAtOnce is TestAllSafeStrategiesAtOnce for the strategies names on e.
func allAtOnce(t *testing.T, e *env, names []string) {
	const (
		stock   = 300
		buyers  = 450
		workers = 64
		id      = "all-at-once"
	)
	d := testDeps{Deps: Deps{WorkDelay: time.Millisecond}, Lock: testLock}
	replicas := []map[string]inventory.Seller{
		e.safeReplica(t, "replica-a", "", d),
		e.safeReplica(t, "replica-b", "", d),
	}
	e.restock(t, id, stock)
	began := time.Now()
	tl, _ := mixBuyers(replicas, names, id, buyers, workers, nil)
	label := fmt.Sprintf("%d buyers of %d units by %v at once", buyers, stock, names)
	tl.report(t, label)
	rounds := e.checkSafety(t, label, id, tl.sales)
	p := e.product(t, id)
	byStrategy := map[string]int{}
	for _, s := range tl.sales {
		byStrategy[s.Strategy]++
	}
	t.Logf("%s in %v: stock %d, %s; sales by strategy %v", label, time.Since(began).Round(time.Millisecond), p.Quantity, formatRounds(rounds), byStrategy)
	if len(tl.sales) != stock || p.Quantity != 0 || p.Sold != stock {
		t.Errorf("%s: %d Sell calls sold, stock %d, ledger %d units; want %d sold, stock 0, %d units",
			label, len(tl.sales), p.Quantity, p.Sold, stock, stock)
	}
	if n := tl.count("sold-out"); n == 0 {
		t.Errorf("%s: no buyer was told ErrSoldOut, want the %d beyond the stock to be (apart from 503s)", label, buyers-stock)
	}
}

// TestRestockDuringSales restocks a product while buyers are in flight
// (restock-race): 50 units, 300 buyers 64 at a time, and a restock to 50
// when a third of them have returned. Each sale belongs to the round whose
// stock it decremented, so every round must be consistent on its own: no
// round sells more than its initial, the current round's initial - quantity
// is its ledger, and the buyers told of a sale in a round are that round's
// ledger rows. Run for each safe strategy alone and for all of them mixed.
func TestRestockDuringSales(t *testing.T) {
	t.Parallel()
	cases := [][]string{}
	for _, name := range safeNames() {
		cases = append(cases, []string{name})
	}
	restockDuringSales(t, newOwnEnv(t), append(cases, safeNames()))
}

// restockDuringSales is TestRestockDuringSales on e, a case for each list
// of strategies in cases (those of a case mixed).
func restockDuringSales(t *testing.T, e *env, cases [][]string) {
	// Each round sells out before the restock (a third of the buyers
	// answered, twice the stock), and a few dozen buyers are in flight
	// across it. (Twice these, 100 and 600, took a lock strategy twice as
	// long, 11 s for etcd, and showed nothing more.)
	const (
		stock     = 50
		buyers    = 300
		workers   = 64
		restockAt = buyers / 3
	)
	d := testDeps{Deps: Deps{WorkDelay: time.Millisecond}, Lock: testLock}
	replicas := []map[string]inventory.Seller{
		e.safeReplica(t, "replica-a", "", d),
		e.safeReplica(t, "replica-b", "", d),
	}
	for _, names := range cases {
		label := names[0]
		if len(names) > 1 {
			label = "mix"
		}
		t.Run(label, func(t *testing.T) {
			id := "restock-" + label
			e.restock(t, id, stock)
			var (
				once       sync.Once
				restocked  = make(chan struct{})
				restockErr error
				atReturn   int64
				from, to   time.Time
			)
			tl, results := mixBuyers(replicas, names, id, buyers, workers, func(returned int64) {
				if returned < restockAt {
					return
				}
				// The buyer that saw the count reach a third restocks; the
				// other workers keep selling meanwhile.
				once.Do(func() {
					defer close(restocked)
					atReturn = returned
					from = time.Now()
					_, restockErr = Restock(context.Background(), e.store, e.rdb, id, "", stock)
					to = time.Now()
				})
			})
			<-restocked
			if restockErr != nil {
				t.Fatalf("Restock(%q, %d) with %d of %d buyers returned: %v", id, stock, atReturn, buyers, restockErr)
			}
			call := fmt.Sprintf("%s: %d buyers of %q with a restock to %d after %d returned", label, buyers, id, stock, atReturn)
			tl.report(t, call)
			rounds := e.checkSafety(t, call, id, tl.sales)
			p := e.product(t, id)
			t.Logf("%s: stock %d; %s", call, p.Quantity, formatRounds(rounds))
			// How far the restock raced sales: the buyers in flight while it ran.
			crossed := map[string]int{}
			for _, r := range results {
				if r.began.Before(to) && r.ended.After(from) {
					k := outcome(r.err)
					if r.err == nil {
						k = fmt.Sprintf("sold in round %d", r.sale.Round)
					}
					crossed[k]++
				}
			}
			t.Logf("%s: buyers in flight across the restock: %v", call, crossed)
			// Round 2's stock only falls, so if any is left at the end there
			// was some all along: a buyer who began after the restock was
			// answered and was told "sold out" got a false answer.
			if p.Quantity > 0 {
				falseSoldOut := 0
				for _, r := range results {
					if r.began.After(to) && errors.Is(r.err, inventory.ErrSoldOut) {
						falseSoldOut++
					}
				}
				if falseSoldOut > 0 {
					t.Errorf("%s: %d buyers who began after the restock were told sold out, with %d units of round 2 left at the end", call, falseSoldOut, p.Quantity)
				}
			}
			if p.Round != 2 {
				t.Errorf("%s: the product is in round %d, want 2 (one restock after the first)", call, p.Round)
			}
		})
	}
}
