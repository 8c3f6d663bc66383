package postgres

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/watchdog"
)

// sellAs records one sale of n units of id under strategy's name: guarded,
// or, unguarded, the unsafe strategies' decrement, which can take the
// stock below zero.
func sellAs(t *testing.T, st *Store, id, strategy string, n int64, guarded bool) {
	t.Helper()
	_, err := st.Record(context.Background(), inventory.Order{ProductID: id, Quantity: n}, strategy, "replica-a",
		func(ctx context.Context, tx *SaleTx) (Decrement, error) {
			if guarded {
				return tx.DecrementIfEnough(ctx, n)
			}
			return tx.DecrementBy(ctx, n)
		})
	if err != nil {
		t.Fatalf("Record(%d of %q by %s): %v", n, id, strategy, err)
	}
}

// TestRoundsTellEachRoundsStory: Rounds gives a product's rounds newest
// first, each with its initial, the units its ledger kept, its sales by
// strategy and the circuit the watchdog opened on it; the current round
// also has the stock. An oversold round stays told after a restock ended
// it, with the circuit it tripped, which no longer refuses anything.
func TestRoundsTellEachRoundsStory(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	const id, quiet = "story", "story-quiet"
	restock(t, st, id, 5) // round 1: 3 of 5 sold, by two strategies
	sellAs(t, st, id, inventory.Atomic, 1, true)
	sellAs(t, st, id, inventory.Atomic, 1, true)
	sellAs(t, st, id, inventory.ForUpdate, 1, true)
	restock(t, st, id, 3) // round 2: 5 of 3 sold by none, stock -2
	sellAs(t, st, id, inventory.None, 2, false)
	sellAs(t, st, id, inventory.None, 3, false)
	wd := watchdog.New(pool, watchdog.NewCircuits(pool), watchdog.Options{Instance: "replica-w"})
	if v, err := wd.Check(ctx); err != nil || len(v) == 0 {
		t.Fatalf("watchdog Check = %v, %v; want round 2's negative stock", v, err)
	}
	restock(t, st, id, 10) // round 3, current: 1 of 10 sold
	sellAs(t, st, id, inventory.Atomic, 1, true)
	restock(t, st, quiet, 4)

	got, err := st.Rounds(ctx, []inventory.Product{product(t, st, id), product(t, st, quiet)}, 20)
	if err != nil {
		t.Fatalf("Rounds: %v", err)
	}
	rounds := got[id]
	if len(rounds) != 3 || len(got) != 2 {
		t.Fatalf("Rounds(%s) = %+v, want 3 rounds (and %s's)", id, got, quiet)
	}
	type want struct {
		round                       int
		current                     bool
		initial, sold, sales, stock int64
		strategies                  map[string]int64
		circuit                     bool
	}
	for i, w := range []want{
		{3, true, 10, 1, 1, 9, map[string]int64{inventory.Atomic: 1}, false},
		{2, false, 3, 5, 2, 0, map[string]int64{inventory.None: 5}, true},
		{1, false, 5, 3, 3, 0, map[string]int64{inventory.Atomic: 2, inventory.ForUpdate: 1}, false},
	} {
		r := rounds[i]
		if r.Round.Round != w.round || r.Current != w.current || r.Initial != w.initial || r.Sold != w.sold || r.Sales != w.sales ||
			r.Stock != w.stock || !maps.Equal(r.Strategies, w.strategies) || (r.Circuit != nil) != w.circuit || r.StartedAt.IsZero() {
			t.Errorf("Rounds(%s)[%d] = %+v (circuit %+v), want round %d current %v, initial %d, sold %d in %d sales, stock %d, by %v, circuit %v",
				id, i, r, r.Circuit, w.round, w.current, w.initial, w.sold, w.sales, w.stock, w.strategies, w.circuit)
		}
	}
	if c := rounds[1].Circuit; c == nil || c.Kind != watchdog.NegativeStock || !c.Open || c.Quantity != -2 || c.Initial != 3 || c.Sold != 5 ||
		c.OpenedBy != "replica-w" || c.OpenedAt.IsZero() || !c.ClosedAt.IsZero() {
		t.Errorf("Rounds(%s): round 2's circuit = %+v, want negative_stock seen by replica-w at stock -2 of 3, 5 sold, not closed", id, c)
	}
	if q := got[quiet]; len(q) != 1 || q[0].Sold != 0 || q[0].Stock != 4 || q[0].Strategies == nil || len(q[0].Strategies) != 0 {
		t.Errorf("Rounds(%s) = %+v, want one round, nothing sold, stock 4, an empty (not nil) map of strategies", quiet, q)
	}

	// perProduct bounds each product's list to its newest rounds.
	st.liveRounds.mu.Lock()
	st.liveRounds.at = time.Time{}
	st.liveRounds.mu.Unlock()
	if two, err := st.Rounds(ctx, []inventory.Product{product(t, st, id)}, 2); err != nil || len(two[id]) != 2 || two[id][1].Round.Round != 2 {
		t.Errorf("Rounds(%s, 2 per product) = %+v, %v; want rounds 3 and 2", id, two, err)
	}
}

// TestRoundsAreReadOncePerNewestSalesAndSettledSalesSummedOnce: within
// Limits.NewestSales every reader gets the same read (a new sale is not in
// it) unless a restock started a round it does not show, which is read at
// once; and a round's sales by strategy, once settled (seen by two reads),
// are not summed again: an ended round's come from memory while its number
// of sales stays the same.
func TestRoundsAreReadOncePerNewestSalesAndSettledSalesSummedOnce(t *testing.T) {
	_, pool := newStore(t)
	st := NewStore(pool, Limits{NewestSales: time.Hour})
	ctx := context.Background()
	const id = "story-polled"
	restock(t, st, id, 10)
	sellAs(t, st, id, inventory.Atomic, 1, true)
	first, err := st.Rounds(ctx, []inventory.Product{product(t, st, id)}, 20)
	if err != nil || len(first[id]) != 1 || first[id][0].Sold != 1 {
		t.Fatalf("Rounds = %+v, %v; want round 1 with 1 sold", first, err)
	}
	sellAs(t, st, id, inventory.Atomic, 1, true)
	p := []inventory.Product{product(t, st, id)}
	for range 20 {
		if again, err := st.Rounds(ctx, p, 20); err != nil || again[id][0].Sold != 1 {
			t.Fatalf("Rounds within NewestSales = %+v, %v; want the first read (1 sold) again", again, err)
		}
	}

	restock(t, st, id, 5) // round 2: read at once, however fresh the last read
	got, err := st.Rounds(ctx, []inventory.Product{product(t, st, id)}, 20)
	if err != nil || len(got[id]) != 2 || got[id][0].Round.Round != 2 || got[id][1].Sold != 2 {
		t.Fatalf("Rounds after a restock = %+v, %v; want round 2, then round 1 with its 2 sold", got, err)
	}
	readAgain(t, st, id) // round 1's sales are settled now
	// Relabel round 1's rows behind the store's back: its number of sales
	// is unchanged, so its sums are not read again.
	if _, err := pool.Exec(ctx, `UPDATE sales SET strategy = 'relabelled' WHERE product_id = $1 AND round = 1`, id); err != nil {
		t.Fatal(err)
	}
	sellAs(t, st, id, inventory.ForUpdate, 1, true)
	later := readAgain(t, st, id)
	if r2, r1 := later[0], later[1]; !maps.Equal(r2.Strategies, map[string]int64{inventory.ForUpdate: 1}) ||
		!maps.Equal(r1.Strategies, map[string]int64{inventory.Atomic: 2}) {
		t.Errorf("Rounds past NewestSales: round 2 by %v, round 1 by %v; want round 2 read again ({forupdate 1}), round 1 from memory ({atomic 2})",
			r2.Strategies, r1.Strategies)
	}
}

// readAgain is Rounds of product id as if NewestSales had passed since the
// last read.
func readAgain(t *testing.T, st *Store, id string) []RoundStory {
	t.Helper()
	st.liveRounds.mu.Lock()
	st.liveRounds.at = time.Time{}
	st.liveRounds.mu.Unlock()
	got, err := st.Rounds(context.Background(), []inventory.Product{product(t, st, id)}, 20)
	if err != nil {
		t.Fatalf("Rounds(%s): %v", id, err)
	}
	return got[id]
}

// TestRoundsCountASaleThatCommitsLate: a sale whose ledger row took its id
// before others and committed after reads had settled the ids around it
// is still counted by strategy (the round is summed whole when its settled
// and new sales do not add up to its number of sales), and every read's
// units by strategy add up to the round's sales.
func TestRoundsCountASaleThatCommitsLate(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	const id = "story-late"
	restock(t, st, id, 100)
	sellAs(t, st, id, inventory.Atomic, 1, true)
	late, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback(ctx) }()
	// Its id now, its totals and commit later: round_totals' row is not
	// taken until then, so the other sales pass.
	if _, err := late.Exec(ctx, `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ($1, 1, 1, 'late', 'x')`, id); err != nil {
		t.Fatal(err)
	}
	sellAs(t, st, id, inventory.Atomic, 1, true)
	for range 2 { // the late sale's id is settled by now
		if r := readAgain(t, st, id); !maps.Equal(r[0].Strategies, map[string]int64{inventory.Atomic: 2}) {
			t.Fatalf("Rounds(%s) before the late commit: by %v, want {atomic 2}", id, r[0].Strategies)
		}
	}
	if _, err := late.Exec(ctx, `UPDATE round_totals SET units = units + 1, sales = sales + 1 WHERE product_id = $1 AND round = 1`, id); err != nil {
		t.Fatal(err)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sellAs(t, st, id, inventory.Atomic, 1, true)
	for i := range 2 {
		if r := readAgain(t, st, id); r[0].Sales != 4 || !maps.Equal(r[0].Strategies, map[string]int64{inventory.Atomic: 3, "late": 1}) {
			t.Errorf("Rounds(%s) read %d after the late commit: %d sales by %v, want 4 sales by {atomic 3, late 1}", id, i+1, r[0].Sales, r[0].Strategies)
		}
	}
}

// BenchmarkRounds measures one read of the live page's 20 products, each
// with 20 rounds, the 19 ended ones of 1,000 sales each and the current
// one of b's, by three strategies: "selling" while every current round
// sells 50 more between reads (the page during a run: the ended rounds
// and the settled sales from memory), "cold" with nothing in memory (a
// replica's first read: every round summed whole).
//
//	go test -run '^$' -bench Rounds ./internal/postgres/
func BenchmarkRounds(b *testing.B) {
	for _, current := range []int{1_000, 20_000} {
		st, pool := newStore(b)
		ctx := context.Background()
		var products []inventory.Product
		seed := func(id string, round, from, to int) {
			_, err := pool.Exec(ctx, `
				WITH l AS (INSERT INTO sales (product_id, round, quantity, strategy, instance)
				           SELECT $1, $2, 1, (ARRAY['atomic','redis','none'])[1 + k % 3], 'bench' FROM generate_series($3::int, $4::int) k)
				INSERT INTO round_totals AS t (product_id, round, units, sales) VALUES ($1, $2, $4 - $3 + 1, $4 - $3 + 1)
				ON CONFLICT (product_id, round) DO UPDATE SET units = t.units + EXCLUDED.units, sales = t.sales + EXCLUDED.sales`,
				id, round, from, to)
			if err != nil {
				b.Fatal(err)
			}
		}
		for i := range 20 {
			id := fmt.Sprintf("bench-rounds-%d-%d", current, i)
			_, err := pool.Exec(ctx, `
				WITH s AS (INSERT INTO stock (product_id, name, quantity, initial, round) VALUES ($1, '', 0, $2, 20))
				INSERT INTO rounds (product_id, round, initial) SELECT $1, n, CASE WHEN n = 20 THEN $2 ELSE 1000 END FROM generate_series(1, 20) n`,
				id, current)
			if err != nil {
				b.Fatal(err)
			}
			for round := 1; round < 20; round++ {
				seed(id, round, 1, 1000)
			}
			seed(id, 20, 1, current)
			products = append(products, inventory.Product{ID: id, Round: 20})
		}
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE sales, rounds, round_totals`); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("current=%d/selling", current), func(b *testing.B) {
			for range 2 { // every sale so far settled
				if _, err := st.readRounds(ctx, products, 20); err != nil {
					b.Fatal(err)
				}
			}
			n := current
			for b.Loop() {
				b.StopTimer()
				for _, p := range products {
					seed(p.ID, 20, n+1, n+50)
				}
				n += 50
				b.StartTimer()
				if _, err := st.readRounds(ctx, products, 20); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("current=%d/cold", current), func(b *testing.B) {
			for b.Loop() {
				st.liveRounds.strategies, st.liveRounds.settle = nil, 0
				if _, err := st.readRounds(ctx, products, 20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
