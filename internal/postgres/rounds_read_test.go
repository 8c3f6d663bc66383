package postgres

import (
	"context"
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

// TestRoundsAreReadOncePerNewestSalesAndEndedRoundsSummedOnce: within
// Limits.NewestSales every reader gets the same read (a new sale is not in
// it) unless a restock started a round it does not show, which is read at
// once; and an ended round's sales by strategy are summed once: a later
// read takes them from memory while its number of sales stays the same.
func TestRoundsAreReadOncePerNewestSalesAndEndedRoundsSummedOnce(t *testing.T) {
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
	// Relabel round 1's rows behind the store's back: its number of sales
	// is unchanged, so its sums are not read again.
	if _, err := pool.Exec(ctx, `UPDATE sales SET strategy = 'relabelled' WHERE product_id = $1 AND round = 1`, id); err != nil {
		t.Fatal(err)
	}
	sellAs(t, st, id, inventory.ForUpdate, 1, true)
	st.liveRounds.mu.Lock()
	st.liveRounds.at = time.Now().Add(-2 * time.Hour) // as an hour passing would leave it
	st.liveRounds.mu.Unlock()
	later, err := st.Rounds(ctx, []inventory.Product{product(t, st, id)}, 20)
	if err != nil || len(later[id]) != 2 {
		t.Fatalf("Rounds past NewestSales = %+v, %v; want 2 rounds", later, err)
	}
	if r2, r1 := later[id][0], later[id][1]; !maps.Equal(r2.Strategies, map[string]int64{inventory.ForUpdate: 1}) ||
		!maps.Equal(r1.Strategies, map[string]int64{inventory.Atomic: 2}) {
		t.Errorf("Rounds past NewestSales: round 2 by %v, round 1 by %v; want round 2 read again ({forupdate 1}), round 1 from memory ({atomic 2})",
			r2.Strategies, r1.Strategies)
	}
}
