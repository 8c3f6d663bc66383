package postgres

import (
	"context"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// TestOrderCountsAreTheCurrentRoundsOrdersByState: one order in each state
// and the units the returns gave back, for the product's current round
// only; a product without orders counts zeros; and a restock (a new round)
// is counted afresh at once, however fresh the last count.
func TestOrderCountsAreTheCurrentRoundsOrdersByState(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	const id, quiet = "counted", "quiet"
	restock(t, st, id, 20)
	restock(t, st, quiet, 5)
	var re reopened
	step := func(order string, actions ...inventory.Action) {
		t.Helper()
		for _, a := range actions {
			if _, err := st.Transition(ctx, order, a, "replica-b", re.reopen); err != nil {
				t.Fatalf("%s of %s: %v", a, order, err)
			}
		}
	}
	hold(t, st, id, 1, time.Hour) // stays held
	step(hold(t, st, id, 2, time.Hour).OrderID, inventory.Pay)
	step(hold(t, st, id, 3, time.Hour).OrderID, inventory.Pay, inventory.Ship)
	step(hold(t, st, id, 4, time.Hour).OrderID, inventory.Cancel)
	step(hold(t, st, id, 5, time.Hour).OrderID, inventory.Pay, inventory.Refund)
	due := hold(t, st, id, 1, time.Hour).OrderID
	dueNow(t, pool, due)
	if n, err := st.ExpireDue(ctx, lock.Fence{Backend: "test", Token: 1}, "expiry@test", 100, re.reopen); n != 1 || err != nil {
		t.Fatalf("ExpireDue = %d, %v; want the 1 due order", n, err)
	}
	sell(t, st, id, 1) // a final sale is no order

	products := []inventory.Product{product(t, st, id), product(t, st, quiet)}
	got, err := st.OrderCounts(ctx, products)
	if err != nil {
		t.Fatalf("OrderCounts: %v", err)
	}
	want := RoundOrders{Held: 1, Paid: 1, Shipped: 1, Cancelled: 1, Expired: 1, Refunded: 1, Returned: 4 + 5 + 1}
	if got[id] != want || got[quiet] != (RoundOrders{}) || len(got) != 2 {
		t.Errorf("OrderCounts(%s, %s) = %+v, want %s %+v and %s all zero", id, quiet, got, id, want, quiet)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}

	restock(t, st, id, 7)
	hold(t, st, id, 2, time.Hour)
	got, err = st.OrderCounts(ctx, []inventory.Product{product(t, st, id)})
	if want := (RoundOrders{Held: 1}); err != nil || got[id] != want {
		t.Errorf("OrderCounts(%s) in round 2 = %+v, %v; want %+v: round 1's orders are not round 2's", id, got, err, want)
	}
}

// TestOrderCountsAreCountedOncePerNewestSalesForEveryReader: within
// Limits.NewestSales every reader of the same products gets the same count,
// however many there are and whatever changed; once it is older, the next
// reader counts again.
func TestOrderCountsAreCountedOncePerNewestSalesForEveryReader(t *testing.T) {
	_, pool := newStore(t)
	st := NewStore(pool, Limits{NewestSales: time.Hour})
	ctx := context.Background()
	const id = "polled"
	restock(t, st, id, 10)
	hold(t, st, id, 1, time.Hour)
	p := []inventory.Product{product(t, st, id)}
	first, err := st.OrderCounts(ctx, p)
	if err != nil || first[id].Held != 1 {
		t.Fatalf("OrderCounts = %+v, %v; want 1 held", first, err)
	}
	hold(t, st, id, 1, time.Hour)
	for range 50 {
		if again, err := st.OrderCounts(ctx, p); err != nil || again[id].Held != 1 {
			t.Fatalf("OrderCounts within NewestSales = %+v, %v; want the first count (1 held) again", again, err)
		}
	}
	st.liveOrders.mu.Lock()
	st.liveOrders.at = time.Now().Add(-2 * time.Hour) // as an hour passing would leave it
	st.liveOrders.mu.Unlock()
	if later, err := st.OrderCounts(ctx, p); err != nil || later[id].Held != 2 {
		t.Errorf("OrderCounts past NewestSales = %+v, %v; want a new count (2 held)", later, err)
	}
}

// product reads product id as the live page's list has it.
func product(t *testing.T, st *Store, id string) inventory.Product {
	t.Helper()
	p, err := st.Product(context.Background(), id)
	if err != nil {
		t.Fatalf("Product(%s): %v", id, err)
	}
	return p
}
