package stock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// transactionsOf counts the ledger rows of products ids and the
// transactions that wrote them (each row carries its writer's xmin).
func (e *env) transactionsOf(t *testing.T, ids []string) (rows, transactions int64) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT xmin::text) FROM sales WHERE product_id = ANY($1)`, ids).
		Scan(&rows, &transactions)
	if err != nil {
		t.Fatalf("count the ledger rows and transactions of %d products: %v", len(ids), err)
	}
	return rows, transactions
}

// TestBatchGroupsManyProductsPerTransaction: 32 buyers at once, each
// buying 8 times, over 256 products, on one replica: with few buyers of
// each product at a time, a committer per product committed about one
// sale per transaction (512 rows in ~500 transactions); one committer for
// the replica's products puts the sales of many products in each.
func TestBatchGroupsManyProductsPerTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const products, buyers, each = 256, 32, 8
	ids := make([]string, products)
	for i := range ids {
		ids[i] = fmt.Sprintf("group-many-%d", i)
		e.restock(t, ids[i], 100)
	}
	s := e.seller(t, inventory.Batch, e.deps("replica-a"))
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, buyers*each)
	for b := range buyers {
		wg.Go(func() {
			<-start
			for i := range each {
				o := inventory.Order{ProductID: ids[(b*each+i)%products], Quantity: 1}
				if _, err := s.Sell(ctx, o); err != nil {
					errs <- fmt.Errorf("Sell(ctx, %s) = %w, want a sale", formatOrder(o), err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rows, transactions := e.transactionsOf(t, ids)
	t.Logf("%d buyers × %d sales over %d products: %d ledger rows in %d transactions (%.1f a transaction)",
		buyers, each, products, rows, transactions, float64(rows)/float64(max(transactions, 1)))
	if rows != buyers*each {
		t.Errorf("%d ledger rows, want %d", rows, buyers*each)
	}
	if transactions*2 > rows {
		t.Errorf("%d ledger rows of %d products in %d transactions: want groups (at least two sales a transaction on average)", rows, products, transactions)
	}
	for _, id := range ids {
		e.checkLedger(t, id)
	}
}

// TestRecordGroupAnswersEachOrderItsOwnTruth: one group holds the orders
// of five products, interleaved: each order is answered with its own
// product's truth (sold while its product's units last, in its product's
// arrival order; sold out; not found for an unknown product; a replay for
// a key a committed sale has), a product whose orders all fail writes
// nothing, and the sales are one transaction.
func TestRecordGroupAnswersEachOrderItsOwnTruth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const a, b, empty, missing, keyed = "group-a", "group-b", "group-empty", "group-missing", "group-keyed"
	e.restock(t, a, 2)
	e.restock(t, b, 5)
	e.restock(t, empty, 0)
	e.restock(t, keyed, 10)
	if _, err := e.seller(t, inventory.Atomic, e.deps("earlier")).Sell(ctx, inventory.Order{ProductID: keyed, Quantity: 1, IdempotencyKey: "group-taken"}); err != nil {
		t.Fatalf("an earlier sale under key \"group-taken\": %v", err)
	}
	type want struct {
		soldLeaving int64 // the stock the sale left; -1: no sale
		err         error
		replay      bool
	}
	sold := func(left int64) want { return want{soldLeaving: left} }
	cases := []struct {
		o    inventory.Order
		want want
	}{
		{inventory.Order{ProductID: b, Quantity: 3}, sold(2)},
		{inventory.Order{ProductID: a, Quantity: 1}, sold(1)},
		{inventory.Order{ProductID: missing, Quantity: 1}, want{soldLeaving: -1, err: inventory.ErrNotFound}},
		{inventory.Order{ProductID: empty, Quantity: 1}, want{soldLeaving: -1, err: inventory.ErrSoldOut}},
		{inventory.Order{ProductID: b, Quantity: 5}, want{soldLeaving: -1, err: inventory.ErrSoldOut}},
		{inventory.Order{ProductID: keyed, Quantity: 1, IdempotencyKey: "group-taken"}, want{soldLeaving: -1, replay: true}},
		{inventory.Order{ProductID: a, Quantity: 1}, sold(0)},
		{inventory.Order{ProductID: b, Quantity: 2}, sold(0)}, // fits behind the 5 that did not
		{inventory.Order{ProductID: a, Quantity: 1}, want{soldLeaving: -1, err: inventory.ErrSoldOut}},
		{inventory.Order{ProductID: missing, Quantity: 2}, want{soldLeaving: -1, err: inventory.ErrNotFound}},
		{inventory.Order{ProductID: keyed, Quantity: 2, IdempotencyKey: "group-fresh"}, sold(7)},
	}
	orders := make([]inventory.Order, len(cases))
	for i, c := range cases {
		orders[i] = c.o
	}
	answers := e.store.RecordGroup(ctx, inventory.Batch, "replica-a", orders)
	if len(answers) != len(orders) {
		t.Fatalf("RecordGroup(%d orders) = %d answers", len(orders), len(answers))
	}
	for i, c := range cases {
		a := answers[i]
		call := fmt.Sprintf("order %d (%s)", i+1, formatOrder(c.o))
		switch {
		case c.want.replay:
			if !a.Replay || a.Err != nil {
				t.Errorf("%s = %+v; want it left to the ledger (replay)", call, a)
			}
		case c.want.err != nil:
			if !errors.Is(a.Err, c.want.err) || a.Replay || a.Sale.ID != 0 {
				t.Errorf("%s = %+v; want %v", call, a, c.want.err)
			}
		default:
			if a.Err != nil || a.Replay || a.Sale.ID == 0 || a.Sale.ProductID != c.o.ProductID || a.Sale.Quantity != c.o.Quantity ||
				a.Sale.Remaining != c.want.soldLeaving || a.Sale.Round != 1 || a.Sale.Strategy != inventory.Batch {
				t.Errorf("%s = %+v; want a batch sale of %d of %q in round 1 leaving %d", call, a, c.o.Quantity, c.o.ProductID, c.want.soldLeaving)
			}
		}
	}
	for _, w := range []struct {
		id             string
		quantity, rows int64
	}{{a, 0, 2}, {b, 0, 2}, {empty, 0, 0}, {keyed, 7, 2}} {
		if p := e.checkLedger(t, w.id); p.Quantity != w.quantity || p.Sales != w.rows {
			t.Errorf("after the group, %q: stock %d, %d ledger rows; want %d and %d", w.id, p.Quantity, p.Sales, w.quantity, w.rows)
		}
	}
	if _, err := e.store.Product(ctx, missing); !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("Product(%q) after the group = %v, want ErrNotFound (nothing created)", missing, err)
	}
	rows, transactions := e.transactionsOf(t, []string{a, b, empty})
	var keyedTx int64
	if err := e.pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM sales WHERE product_id = $1 OR product_id = ANY($2)`,
		keyed, []string{a, b}).Scan(&keyedTx); err != nil {
		t.Fatal(err)
	}
	if rows != 4 || transactions != 1 || keyedTx != 2 {
		t.Errorf("the group's 5 sales: %d rows of %q, %q in %d transactions, %d with %q's (its earlier sale's and the group's); want 4 rows in 1, and 2",
			rows, a, b, transactions, keyedTx, keyed)
	}
}

// TestGroupsWithProductsInCommonDoNotDeadlock: two replicas' groups hold
// the same products in opposite arrival order, at once, many times. Each
// group locks its rows in product order, so one waits for the other and
// every order sells; locking in arrival order, each would hold a row the
// other waits for, and Postgres would abort one group (40P01): every order
// in it an error.
func TestGroupsWithProductsInCommonDoNotDeadlock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = fmt.Sprintf("group-overlap-%d", i)
		e.restock(t, ids[i], 10_000)
	}
	replicas := []*postgres.Store{
		postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{}),
		postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{}),
	}
	const rounds = 40
	for round := range rounds {
		var got [2][]postgres.BatchAnswer
		var wg sync.WaitGroup
		start := make(chan struct{})
		for r, store := range replicas {
			orders := make([]inventory.Order, len(ids))
			for i := range ids {
				id := ids[i]
				if r == 1 {
					id = ids[len(ids)-1-i]
				}
				orders[i] = inventory.Order{ProductID: id, Quantity: 1}
			}
			wg.Go(func() {
				<-start
				got[r] = store.RecordGroup(ctx, inventory.Batch, fmt.Sprintf("replica-%d", r), orders)
			})
		}
		close(start)
		wg.Wait()
		for r := range got {
			for i, a := range got[r] {
				if a.Err != nil || a.Sale.ID == 0 {
					t.Fatalf("round %d, replica %d's group, order %d: %+v; want a sale", round, r, i+1, a)
				}
			}
		}
	}
	for _, id := range ids {
		if p := e.checkLedger(t, id); p.Sales != 2*rounds {
			t.Errorf("%q: %d ledger rows, want %d", id, p.Sales, 2*rounds)
		}
	}
}

// TestGroupCommitReplyLost loses the reply to a group's COMMIT after
// Postgres committed it: the group's sales are found in the ledger (by one
// sale's key: the group committed all or nothing) and every order is
// answered with its own sale. Then a group's COMMIT is dropped before it
// reaches Postgres: the ledger shows none of its sales, so every order is
// told ErrUnavailable (nothing sold), not an unknown outcome.
func TestGroupCommitReplyLost(t *testing.T) {
	e := newEnv(t)
	proxy, pool := e.commitCutterPool(t)
	store := postgres.NewStore(pool, postgres.Limits{CommitTimeout: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := []string{"group-cut-a", "group-cut-b", "group-cut-c"}
	for _, id := range ids {
		e.restock(t, id, 10)
	}
	orders := []inventory.Order{
		{ProductID: ids[2], Quantity: 1},
		{ProductID: ids[0], Quantity: 2, IdempotencyKey: "group-cut-key"},
		{ProductID: ids[1], Quantity: 3},
		{ProductID: ids[0], Quantity: 1},
	}

	proxy.Arm()
	answers := store.RecordGroup(ctx, inventory.Batch, "replica-cut", orders)
	if proxy.Armed() || proxy.Cuts() != 1 {
		proxy.Disarm()
		t.Fatalf("the proxy cut %d COMMIT replies during the group (still armed: %v), want 1", proxy.Cuts(), proxy.Armed())
	}
	var sales []inventory.Sale
	for i, a := range answers {
		o := orders[i]
		if a.Err != nil || a.Replay || a.Sale.ID == 0 || a.Sale.ProductID != o.ProductID || a.Sale.Quantity != o.Quantity {
			t.Errorf("order %d (%s), its group's COMMIT reply lost = %+v; want its sale (the group committed)", i+1, formatOrder(o), a)
			continue
		}
		sales = append(sales, a.Sale)
	}
	var inLedger int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM sales WHERE id = ANY($1)`, saleIDs(sales)).Scan(&inLedger); err != nil || inLedger != len(orders) {
		t.Errorf("the %d sales answered are %d ledger rows (%v); want %d", len(sales), inLedger, err, len(orders))
	}

	proxy.ArmUnsent()
	answers = store.RecordGroup(ctx, inventory.Batch, "replica-cut", orders)
	if proxy.Armed() || proxy.Cuts() != 2 {
		proxy.Disarm()
		t.Fatalf("the proxy dropped %d COMMITs in all (still armed: %v), want 2", proxy.Cuts(), proxy.Armed())
	}
	for i, a := range answers {
		if o := orders[i]; !errors.Is(a.Err, inventory.ErrUnavailable) || errors.Is(a.Err, inventory.ErrOutcomeUnknown) {
			t.Errorf("order %d (%s), its group's COMMIT dropped = %+v; want ErrUnavailable, not an unknown outcome (the ledger shows no sale)",
				i+1, formatOrder(o), a)
		}
	}
	for i, want := range []struct{ quantity, rows int64 }{{7, 2}, {7, 1}, {9, 1}} {
		if p := e.checkLedger(t, ids[i]); p.Quantity != want.quantity || p.Sales != want.rows {
			t.Errorf("%q after a group committed (reply lost) and one not: stock %d, %d ledger rows; want %d and %d",
				ids[i], p.Quantity, p.Sales, want.quantity, want.rows)
		}
	}
}

func saleIDs(sales []inventory.Sale) []int64 {
	ids := make([]int64, len(sales))
	for i, s := range sales {
		ids[i] = s.ID
	}
	return ids
}
