package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// hold records a hold of n units of id, due within pay.
func hold(t *testing.T, st *Store, id string, n int64, pay time.Duration) inventory.Sale {
	t.Helper()
	o := inventory.Order{ProductID: id, Quantity: n, PayWithin: pay}
	sale, err := st.Record(context.Background(), o, inventory.Atomic, "replica-a",
		func(ctx context.Context, tx *SaleTx) (Decrement, error) { return tx.DecrementIfEnough(ctx, n) })
	if err != nil {
		t.Fatalf("Record(hold %d of %q within %v): %v", n, id, pay, err)
	}
	return sale
}

// reopened counts the Reopen calls of a test's returns.
type reopened struct {
	mu    sync.Mutex
	calls []string
}

func (r *reopened) reopen(_ context.Context, _ *RoundTx, id string, round int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%s@%d", id, round))
	return nil
}

// dueNow moves order id's deadline to the past, as time passing would.
func dueNow(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE orders SET expires_at = now() - interval '1 millisecond' WHERE id = $1`, id); err != nil {
		t.Fatalf("move the deadline of %s: %v", id, err)
	}
}

// orderViolations reads from Postgres every broken invariant of the
// orders of product id: stock = initial - (units sold - units returned to
// it) for the current round and never below 0; every cancelled, expired or
// refunded order returned once (returns' key: at most once), and no held,
// paid or shipped order returned anything.
func orderViolations(t *testing.T, pool *pgxpool.Pool, id string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var quantity, initial, sold, returned int64
	if err := pool.QueryRow(ctx, `
		SELECT s.quantity, s.initial,
		       (SELECT coalesce(sum(quantity), 0) FROM sales WHERE product_id = s.product_id AND round = s.round),
		       (SELECT coalesce(sum(quantity), 0) FROM returns WHERE product_id = s.product_id AND round = s.round AND restored)
		FROM stock s WHERE s.product_id = $1`, id).Scan(&quantity, &initial, &sold, &returned); err != nil {
		t.Fatalf("read %q: %v", id, err)
	}
	if quantity < 0 {
		out = append(out, fmt.Sprintf("stock %d below 0", quantity))
	}
	if initial-quantity != sold-returned {
		out = append(out, fmt.Sprintf("initial %d - stock %d != sold %d - returned %d", initial, quantity, sold, returned))
	}
	rows, err := pool.Query(ctx, `
		SELECT o.id::text, o.state, r.order_id IS NOT NULL
		FROM orders o LEFT JOIN returns r ON r.order_id = o.id
		WHERE o.product_id = $1
		  AND (r.order_id IS NULL) = (o.state IN ('cancelled', 'expired', 'refunded'))`, id)
	if err != nil {
		t.Fatalf("read the orders of %q: %v", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var order, state string
		var back bool
		if err := rows.Scan(&order, &state, &back); err != nil {
			t.Fatal(err)
		}
		if back {
			out = append(out, fmt.Sprintf("order %s is %s and its units came back", order, state))
		} else {
			out = append(out, fmt.Sprintf("order %s is %s and its units never came back", order, state))
		}
	}
	return out
}

func TestAHoldIsASaleWithAnOrder(t *testing.T) {
	st, pool := newStore(t)
	const id = "held-product"
	restock(t, st, id, 5)
	before := time.Now()
	sale := hold(t, st, id, 2, 15*time.Minute)
	if sale.OrderID == "" || sale.OrderState != inventory.Held || sale.Remaining != 3 {
		t.Fatalf("hold of 2 of 5 = %+v, want an order id, state held, 3 remaining", sale)
	}
	if d := sale.ExpiresAt.Sub(before); d < 14*time.Minute || d > 16*time.Minute {
		t.Errorf("hold within 15m expires %v after it was asked, want about 15m", d)
	}
	r, err := st.Order(context.Background(), sale.OrderID)
	if err != nil {
		t.Fatalf("Order(%s): %v", sale.OrderID, err)
	}
	if r.State != inventory.Held || r.SaleID != sale.ID || r.Quantity != 2 || r.Round != 1 || len(r.History) != 1 || r.History[0].By != "replica-a" {
		t.Errorf("Order(%s) = %+v, want held, sale %d, 2 units, round 1, one event by replica-a", sale.OrderID, r, sale.ID)
	}
	final := sell(t, st, id, 1)
	if final.OrderID != "" {
		t.Errorf("a sale without pay_within has order %q, want none", final.OrderID)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

func TestOrderLife(t *testing.T) {
	st, pool := newStore(t)
	const id = "life"
	restock(t, st, id, 10)
	ctx := context.Background()
	var re reopened
	step := func(order string, a inventory.Action) (inventory.OrderRecord, error) {
		return st.Transition(ctx, order, a, "replica-b", re.reopen)
	}
	paid := hold(t, st, id, 3, time.Minute).OrderID
	cancelled := hold(t, st, id, 2, time.Minute).OrderID
	steps := []struct {
		order string
		a     inventory.Action
		state inventory.OrderState
		err   error
		stock int64
	}{
		{paid, inventory.Pay, inventory.Paid, nil, 5},
		{paid, inventory.Pay, inventory.Paid, nil, 5}, // a repeat
		{paid, inventory.Cancel, inventory.Paid, inventory.ErrOrderState, 5},
		{cancelled, inventory.Cancel, inventory.Cancelled, nil, 7},
		{cancelled, inventory.Cancel, inventory.Cancelled, nil, 7}, // a repeat returns nothing more
		{cancelled, inventory.Pay, inventory.Cancelled, inventory.ErrOrderState, 7},
		{cancelled, inventory.Refund, inventory.Cancelled, inventory.ErrOrderState, 7},
		{paid, inventory.Refund, inventory.Refunded, nil, 10},
		{paid, inventory.Refund, inventory.Refunded, nil, 10},
		{paid, inventory.Ship, inventory.Refunded, inventory.ErrOrderState, 10},
	}
	for i, s := range steps {
		r, err := step(s.order, s.a)
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
			t.Errorf("step %d: %s of %s = %v, want %v", i+1, s.a, s.order, err, s.err)
		}
		if r.State != s.state {
			t.Errorf("step %d: %s of %s left it %q, want %q", i+1, s.a, s.order, r.State, s.state)
		}
		p, err := st.Product(ctx, id)
		if err != nil || p.Quantity != s.stock || p.Initial-p.Quantity != p.Sold {
			t.Errorf("step %d: after %s of %s the product is %+v (%v), want stock %d and initial - stock = sold", i+1, s.a, s.order, p, err, s.stock)
		}
	}
	if len(re.calls) != 2 {
		t.Errorf("reopen called %v, want once for the cancel and once for the refund", re.calls)
	}
	r, _ := st.Order(ctx, paid)
	var states []inventory.OrderState
	for _, e := range r.History {
		states = append(states, e.State)
	}
	if fmt.Sprint(states) != "[held paid refunded]" {
		t.Errorf("history of the refunded order = %v, want [held paid refunded]", states)
	}
	shipped := hold(t, st, id, 1, time.Minute).OrderID
	for _, a := range []inventory.Action{inventory.Pay, inventory.Ship} {
		if _, err := step(shipped, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if _, err := step(shipped, inventory.Refund); !errors.Is(err, inventory.ErrOrderState) {
		t.Errorf("refund after ship = %v, want ErrOrderState", err)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

func TestBadOrderStepsChangeNothing(t *testing.T) {
	st, _ := newStore(t)
	restock(t, st, "p", 1)
	ctx := context.Background()
	o := hold(t, st, "p", 1, time.Minute).OrderID
	cases := []struct {
		id   string
		a    inventory.Action
		want error
	}{
		{"not-a-uuid", inventory.Pay, inventory.ErrBadOrderID},
		{"'; DROP TABLE orders; --", inventory.Cancel, inventory.ErrBadOrderID},
		{"00000000-0000-4000-8000-000000000000", inventory.Pay, inventory.ErrOrderNotFound},
		{o, inventory.Expire, inventory.ErrBadAction},
		{o, "steal", inventory.ErrBadAction},
	}
	for _, c := range cases {
		if _, err := st.Transition(ctx, c.id, c.a, "x", nil); !errors.Is(err, c.want) {
			t.Errorf("Transition(%q, %q) = %v, want %v", c.id, c.a, err, c.want)
		}
	}
	if r, err := st.Order(ctx, o); err != nil || r.State != inventory.Held || len(r.History) != 1 {
		t.Errorf("order after the bad steps = %+v, %v; want it held, untouched", r, err)
	}
}

// TestConcurrentCancelsReturnOnce: twenty callers cancel one order at once
// (no lock): one cancel is taken, every caller is answered cancelled, and
// the units come back once.
func TestConcurrentCancelsReturnOnce(t *testing.T) {
	st, pool := newStore(t)
	const id = "cancel-crowd"
	restock(t, st, id, 4)
	order := hold(t, st, id, 3, time.Minute).OrderID
	start := make(chan struct{})
	errs := make(chan error, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			<-start
			r, err := st.Transition(context.Background(), order, inventory.Cancel, "crowd", nil)
			if err == nil && r.State != inventory.Cancelled {
				err = fmt.Errorf("answered %s", r.State)
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent cancel: %v", err)
		}
	}
	p, _ := st.Product(context.Background(), id)
	if p.Quantity != 4 || p.Returned != 3 {
		t.Errorf("after 20 cancels of one order of 3: stock %d, returned %d; want 4 and 3", p.Quantity, p.Returned)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestPayRacingExpiryAtTheDeadline: orders come due while payments and the
// expiry sweep race for them: each order ends paid or expired, never both,
// and a payment that lost is told ErrOrderExpired.
func TestPayRacingExpiryAtTheDeadline(t *testing.T) {
	st, pool := newStore(t)
	const id = "deadline"
	const n = 40
	restock(t, st, id, n)
	ctx := context.Background()
	orders := make([]string, n)
	for i := range orders {
		orders[i] = hold(t, st, id, 1, time.Minute).OrderID
	}
	// Every deadline falls within the next 200 ms, while both sides run.
	if _, err := pool.Exec(ctx, `UPDATE orders SET expires_at = now() + random() * interval '200 milliseconds' WHERE product_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	fence := lock.Fence{Backend: "test", Token: 1}
	start := make(chan struct{})
	var wg sync.WaitGroup
	payErrs := make([]error, n)
	for i, o := range orders {
		wg.Go(func() {
			<-start
			_, payErrs[i] = st.Transition(ctx, o, inventory.Pay, "buyer", nil)
		})
	}
	wg.Go(func() {
		<-start
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			var held int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE product_id = $1 AND state = 'held'`, id).Scan(&held); err != nil || held == 0 {
				return
			}
			if _, err := st.ExpireDue(ctx, fence, "sweeper", 1000, nil); err != nil {
				t.Errorf("ExpireDue: %v", err)
				return
			}
		}
	})
	close(start)
	wg.Wait()
	paid, expired := 0, 0
	for i, o := range orders {
		r, err := st.Order(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.State == inventory.Paid && payErrs[i] == nil:
			paid++
		case r.State == inventory.Expired && errors.Is(payErrs[i], inventory.ErrOrderExpired):
			expired++
		default:
			t.Errorf("order %s ended %s and its payment was told %v; want paid and nil, or expired and ErrOrderExpired", o, r.State, payErrs[i])
		}
	}
	t.Logf("%d paid, %d expired", paid, expired)
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestAStaleSweeperIsRefusedByItsFence: a runner whose lease ended (a newer
// runner claimed the job with a higher token) writes nothing.
func TestAStaleSweeperIsRefusedByItsFence(t *testing.T) {
	st, pool := newStore(t)
	const id = "stale-sweeper"
	restock(t, st, id, 2)
	ctx := context.Background()
	first, second := hold(t, st, id, 1, time.Minute).OrderID, hold(t, st, id, 1, time.Minute).OrderID
	dueNow(t, pool, first)
	if n, err := st.ExpireDue(ctx, lock.Fence{Backend: "redislock", Token: 7}, "new-runner", 1000, nil); err != nil || n != 1 {
		t.Fatalf("the new runner's sweep = %d, %v; want 1 expired", n, err)
	}
	dueNow(t, pool, second)
	n, err := st.ExpireDue(ctx, lock.Fence{Backend: "redislock", Token: 6}, "old-runner", 1000, nil)
	if !errors.Is(err, inventory.ErrLockBreach) || !errors.Is(err, inventory.ErrLockLost) || n != 0 {
		t.Errorf("the stale runner's sweep = %d, %v; want 0 and ErrLockBreach with ErrLockLost", n, err)
	}
	if r, _ := st.Order(ctx, second); r.State != inventory.Held {
		t.Errorf("the order only the stale runner swept is %s, want held", r.State)
	}
	if n, err := st.ExpireDue(ctx, lock.Fence{Backend: "redislock", Token: 7}, "new-runner", 1000, nil); err != nil || n != 1 {
		t.Errorf("the new runner's next sweep = %d, %v; want 1 expired", n, err)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestASweepExpiresProductsSideBySide: one product whose return waits
// (here: its Reopen, as on a hot stock row or a replica's sold-out mark)
// does not hold back another product's expiry. Every Reopen waits here
// until all three products' are under way: a sweep of one product after
// another never gets there.
func TestASweepExpiresProductsSideBySide(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	products := []string{"side-by-side-1", "side-by-side-2", "side-by-side-3"}
	for _, id := range products {
		restock(t, st, id, 1)
		dueNow(t, pool, hold(t, st, id, 1, time.Minute).OrderID)
	}
	var entered sync.WaitGroup
	entered.Add(len(products))
	all := make(chan struct{})
	go func() { entered.Wait(); close(all) }()
	reopen := func(ctx context.Context, _ *RoundTx, id string, _ int) error {
		entered.Done()
		select {
		case <-all:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s: the other products' returns never began beside this one's", id)
		}
	}
	n, err := st.ExpireDue(ctx, lock.Fence{Backend: "redislock", Token: 1}, "runner", 1000, reopen)
	if err != nil || n != len(products) {
		t.Fatalf("ExpireDue = %d, %v; want %d expired side by side", n, err, len(products))
	}
	for _, id := range products {
		if v := orderViolations(t, pool, id); len(v) > 0 {
			t.Errorf("%s: violations: %v", id, v)
		}
	}
}

// TestANewerRunnersClaimWaitsForTheOlderRunnersWritesInFlight: a runner
// whose lease was taken over while its sweep's transaction was under way
// (a pause, a slow return) commits first, and the new runner's claim
// waits for it; after the claim, the old runner's next transaction is
// refused by its fence and writes nothing.
func TestANewerRunnersClaimWaitsForTheOlderRunnersWritesInFlight(t *testing.T) {
	st, pool := newStore(t)
	const id = "claim-waits"
	restock(t, st, id, 2)
	ctx := context.Background()
	first, second := hold(t, st, id, 1, time.Minute).OrderID, hold(t, st, id, 1, time.Minute).OrderID
	dueNow(t, pool, first)
	inside, release := make(chan struct{}), make(chan struct{})
	type swept struct {
		n   int
		err error
	}
	old := make(chan swept, 1)
	go func() {
		n, err := st.ExpireDue(ctx, lock.Fence{Backend: "redislock", Token: 7}, "old-runner", 1000,
			func(context.Context, *RoundTx, string, int) error { close(inside); <-release; return nil })
		old <- swept{n, err}
	}()
	<-inside
	claimed := make(chan error, 1)
	go func() { claimed <- st.claimJob(ctx, ExpiryJob, lock.Fence{Backend: "redislock", Token: 8}) }()
	testenv.WaitFor(t, "the newer claim waiting on the older runner's transaction", 10*time.Second, func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO job_fences%')`).Scan(&waiting)
		return err == nil && waiting
	})
	select {
	case err := <-claimed:
		t.Fatalf("the newer claim returned %v while the older runner's transaction was in flight", err)
	default:
	}
	close(release)
	if r := <-old; r.err != nil || r.n != 1 {
		t.Fatalf("the older runner's sweep in flight = %d, %v; want its 1 order expired", r.n, r.err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("the newer claim = %v", err)
	}
	dueNow(t, pool, second)
	n, err := st.expireProduct(ctx, id, lock.Fence{Backend: "redislock", Token: 7}, "old-runner", 1000, nil)
	if !errors.Is(err, inventory.ErrLockBreach) || !errors.Is(err, inventory.ErrLockLost) || n != 0 {
		t.Errorf("the older runner's next transaction = %d, %v; want 0 and ErrLockBreach with ErrLockLost", n, err)
	}
	if r, _ := st.Order(ctx, second); r.State != inventory.Held {
		t.Errorf("the order only the older runner swept after the claim is %s, want held", r.State)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestTwoUnfencedUnguardedSweepersAreCaughtByTheReturnsKey shows what the
// guard and the fence stand in front of: two sweepers that each read the
// same due order and write without the state guard would return its units
// twice; the second return is refused by the returns table's key, and the
// stock keeps the units once.
func TestTwoUnfencedUnguardedSweepersAreCaughtByTheReturnsKey(t *testing.T) {
	st, pool := newStore(t)
	const id = "double-return"
	restock(t, st, id, 3)
	ctx := context.Background()
	order := hold(t, st, id, 2, time.Minute).OrderID
	dueNow(t, pool, order)
	naiveSweep := func() error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer rollback(ctx, tx)
		var o heldUnits
		// No "AND state = 'held'": the sweeper trusts what it read before.
		if err := tx.QueryRow(ctx, `UPDATE orders SET state = 'expired' WHERE id = $1 RETURNING id::text, product_id, round, quantity`, order).
			Scan(&o.order, &o.product, &o.round, &o.quantity); err != nil {
			return err
		}
		if err := giveBack(ctx, tx, id, []heldUnits{o}, inventory.Expired, nil); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := naiveSweep(); err != nil {
		t.Fatalf("the first unguarded sweep: %v", err)
	}
	if err := naiveSweep(); !errors.Is(err, inventory.ErrOrderState) {
		t.Errorf("the second unguarded sweep of the same order = %v, want it refused (ErrOrderState: already returned)", err)
	}
	p, _ := st.Product(ctx, id)
	if p.Quantity != 3 || p.Returned != 2 {
		t.Errorf("stock %d, returned %d after two unguarded sweeps; want 3 and 2 (returned once)", p.Quantity, p.Returned)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestAnUnguardedPaymentLosesToExpiryAndTheGuardedOneDoesNot shows what a
// lock alone gets wrong: a payment that checks the state and the deadline
// it read, then writes, pays an order the expiry job took in between (its
// lock held by the payment's caller does not bind the job): the order ends
// paid with its units back on sale. The guarded payment, in the same
// interleaving, is told ErrOrderExpired and changes nothing.
func TestAnUnguardedPaymentLosesToExpiryAndTheGuardedOneDoesNot(t *testing.T) {
	st, pool := newStore(t)
	const id = "unguarded-pay"
	restock(t, st, id, 2)
	ctx := context.Background()
	sweep := func() {
		if _, err := st.ExpireDue(ctx, lock.Fence{Backend: "test", Token: 1}, "sweeper", 1000, nil); err != nil {
			t.Fatalf("ExpireDue: %v", err)
		}
	}

	naive := hold(t, st, id, 1, time.Minute).OrderID
	var state string
	var due bool
	if err := pool.QueryRow(ctx, `SELECT state, expires_at <= now() FROM orders WHERE id = $1`, naive).Scan(&state, &due); err != nil || state != "held" || due {
		t.Fatalf("read the order to pay: %s, due %v, %v", state, due, err)
	}
	dueNow(t, pool, naive) // the deadline passes between the read and the write
	sweep()
	if _, err := pool.Exec(ctx, `UPDATE orders SET state = 'paid' WHERE id = $1`, naive); err != nil {
		t.Fatal(err)
	}
	if v := orderViolations(t, pool, id); len(v) != 1 {
		t.Errorf("after the unguarded payment: violations %v, want exactly the paid order whose units came back", v)
	}

	guarded := hold(t, st, id, 1, time.Minute).OrderID
	dueNow(t, pool, guarded)
	sweep()
	if r, err := st.Transition(ctx, guarded, inventory.Pay, "buyer", nil); !errors.Is(err, inventory.ErrOrderExpired) || r.State != inventory.Expired {
		t.Errorf("the guarded payment after the sweep = %s, %v; want expired and ErrOrderExpired", r.State, err)
	}
	guarded2 := hold(t, st, id, 1, time.Minute).OrderID
	dueNow(t, pool, guarded2)
	if r, err := st.Transition(ctx, guarded2, inventory.Pay, "buyer", nil); !errors.Is(err, inventory.ErrOrderExpired) || r.State != inventory.Held {
		t.Errorf("the guarded payment after the deadline, before any sweep = %s, %v; want held and ErrOrderExpired", r.State, err)
	}
}

// TestAReturnAfterARestockLeavesTheNewRoundAlone: an order of a round a
// restock ended comes back to no stock (the restock set the new round's);
// its return is recorded, not restored.
func TestAReturnAfterARestockLeavesTheNewRoundAlone(t *testing.T) {
	st, pool := newStore(t)
	const id = "old-round"
	restock(t, st, id, 5)
	ctx := context.Background()
	order := hold(t, st, id, 2, time.Minute).OrderID
	restock(t, st, id, 10)
	var re reopened
	if _, err := st.Transition(ctx, order, inventory.Cancel, "buyer", re.reopen); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	p, _ := st.Product(ctx, id)
	if p.Quantity != 10 || p.Returned != 0 || p.Round != 2 {
		t.Errorf("after cancelling an order of round 1 in round 2: %+v; want stock 10, nothing returned to round 2", p)
	}
	if len(re.calls) != 0 {
		t.Errorf("reopen called %v for units that did not come back", re.calls)
	}
	var restored bool
	if err := pool.QueryRow(ctx, `SELECT restored FROM returns WHERE order_id = $1`, order).Scan(&restored); err != nil || restored {
		t.Errorf("the return of the old round's order: restored %v, %v; want recorded, not restored", restored, err)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestAHoldIsReplayedByItsKey: a repeat of a hold with its Idempotency-Key
// answers the same order as it is now; the key used for a final sale
// conflicts.
func TestAHoldIsReplayedByItsKey(t *testing.T) {
	st, _ := newStore(t)
	const id = "held-key"
	restock(t, st, id, 5)
	ctx := context.Background()
	o := inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: "hold-1", PayWithin: time.Minute}
	first, err := st.Record(ctx, o, inventory.Atomic, "a", func(ctx context.Context, tx *SaleTx) (Decrement, error) { return tx.DecrementIfEnough(ctx, 1) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, first.OrderID, inventory.Pay, "a", nil); err != nil {
		t.Fatal(err)
	}
	again, found, err := st.Replay(ctx, o)
	if err != nil || !found || again.OrderID != first.OrderID || again.OrderState != inventory.Paid || !again.Replayed {
		t.Errorf("Replay of the hold = %+v, %v, %v; want order %s, now paid, replayed", again, found, err, first.OrderID)
	}
	o.PayWithin = 0
	if _, _, err := st.Replay(ctx, o); !errors.Is(err, inventory.ErrIdempotencyConflict) {
		t.Errorf("Replay of the hold's key as a final sale = %v, want ErrIdempotencyConflict", err)
	}
	// Another deadline is another order: its buyer would be told a
	// deadline it did not ask for.
	for _, d := range []time.Duration{time.Minute + time.Millisecond, time.Hour, time.Second} {
		o.PayWithin = d
		if _, _, err := st.Replay(ctx, o); !errors.Is(err, inventory.ErrIdempotencyConflict) {
			t.Errorf("Replay of the hold's key with pay_within %v (held for 1m) = %v, want ErrIdempotencyConflict", d, err)
		}
	}
	o.PayWithin = time.Minute + 400*time.Microsecond // written to the millisecond
	if _, found, err := st.Replay(ctx, o); err != nil || !found {
		t.Errorf("Replay with pay_within 1m0.0004s (held for 1m, written in ms) = %v, %v; want the hold", found, err)
	}
}

// TestABatchHoldsToo: a batch's orders with a deadline are holds.
func TestABatchHoldsToo(t *testing.T) {
	st, pool := newStore(t)
	const id = "batched-holds"
	restock(t, st, id, 5)
	answers := st.RecordBatch(context.Background(), id, inventory.Batch, "a", lock.Fence{}, []inventory.Order{
		{ProductID: id, Quantity: 2, PayWithin: time.Minute},
		{ProductID: id, Quantity: 1},
		{ProductID: id, Quantity: 1, PayWithin: time.Hour},
	})
	for i, a := range answers {
		wantHold := i != 1
		if a.Err != nil || (a.Sale.OrderID != "") != wantHold {
			t.Errorf("answer %d = %+v, %v; want a hold %v", i, a.Sale, a.Err, wantHold)
		}
	}
	if _, err := st.Transition(context.Background(), answers[0].Sale.OrderID, inventory.Cancel, "a", nil); err != nil {
		t.Fatal(err)
	}
	if v := orderViolations(t, pool, id); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestTheFenceFloorOfAJobIsItsLastClaim: a lock counter lost with Redis
// restarts above the expiry job's last claimed token (else every sweep
// after a Redis restart would be refused as stale); an order's lock, whose
// steps claim nothing, has floor 0.
func TestTheFenceFloorOfAJobIsItsLastClaim(t *testing.T) {
	st, pool := newStore(t)
	const id = "floored"
	restock(t, st, id, 1)
	ctx := context.Background()
	order := hold(t, st, id, 1, time.Minute).OrderID
	dueNow(t, pool, order)
	if _, err := st.ExpireDue(ctx, lock.Fence{Backend: "redislock", Token: 41}, "runner", 1000, nil); err != nil {
		t.Fatal(err)
	}
	floor := st.FenceFloor("redislock")
	for key, want := range map[string]int64{
		"lock:job:{" + ExpiryJob + "}": 41,
		"lock:order:{" + order + "}":   0,
		"lock:{" + id + "}":            0,
	} {
		if got, err := floor(ctx, key); err != nil || got != want {
			t.Errorf("FenceFloor(redislock)(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	if got, _ := st.FenceFloor("etcdlock")(ctx, "lock:job:{"+ExpiryJob+"}"); got != 0 {
		t.Errorf("FenceFloor(etcdlock) of the job = %d, want 0 (another counter)", got)
	}
}
