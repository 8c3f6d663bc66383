package stock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/postgres"
)

// TestRecordBatchAllocatesInArrivalOrder: 6 in stock, orders of 3, 5, 1, 1,
// 1 and 1: the 3 fits, the 5 does not, the 1s after it still fit. An order
// whose key a committed sale or an order ahead of it in the batch took is
// left to the ledger (replay) and withholds nothing: the last order gets
// the unit the replays did not take.
func TestRecordBatchAllocatesInArrivalOrder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const id = "batch-order"
	e.restock(t, id, 10)
	if _, err := e.seller(t, inventory.Atomic, e.deps("earlier")).Sell(ctx, inventory.Order{ProductID: id, Quantity: 4, IdempotencyKey: "taken"}); err != nil {
		t.Fatalf("an earlier sale under key \"taken\": %v", err)
	}
	orders := []inventory.Order{
		{ProductID: id, Quantity: 3},
		{ProductID: id, Quantity: 5},
		{ProductID: id, Quantity: 1, IdempotencyKey: "taken"}, // a committed sale has it
		{ProductID: id, Quantity: 1, IdempotencyKey: "twin"},
		{ProductID: id, Quantity: 1, IdempotencyKey: "twin"}, // the order ahead has it
		{ProductID: id, Quantity: 1},
	}
	answers := e.store.RecordBatch(ctx, id, inventory.Batch, "replica-a", lock.Fence{}, orders)
	want := []struct {
		sold      bool
		remaining int64
		soldOut   bool
		replay    bool
	}{
		{sold: true, remaining: 3},
		{soldOut: true},
		{replay: true},
		{sold: true, remaining: 2},
		{replay: true},
		{sold: true, remaining: 1}, // the replays took no units
	}
	for i, a := range answers {
		w := want[i]
		call := fmt.Sprintf("order %d (%s)", i+1, formatOrder(orders[i]))
		switch {
		case w.sold && (a.Err != nil || a.Replay || a.Sale.ID == 0 || a.Sale.Remaining != w.remaining || a.Sale.Round != 1):
			t.Errorf("%s = %+v; want a sale in round 1 leaving %d", call, a, w.remaining)
		case w.soldOut && !errors.Is(a.Err, inventory.ErrSoldOut):
			t.Errorf("%s = %+v; want ErrSoldOut", call, a)
		case w.replay && (!a.Replay || a.Err != nil):
			t.Errorf("%s = %+v; want it left to the ledger (replay)", call, a)
		}
	}
	if p := e.checkLedger(t, id); p.Quantity != 1 || p.Sales != 4 || p.Sold != 9 {
		t.Errorf("after the batch: stock %d, %d ledger rows, %d units; want 1, 4, 9", p.Quantity, p.Sales, p.Sold)
	}
}

// TestBatchCommitsManySalesPerTransaction: 64 buyers at once on one
// replica share transactions (the rows of one transaction carry its
// timestamp), and a retried key sells once however many copies race.
func TestBatchCommitsManySalesPerTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const id = "batch-many"
	e.restock(t, id, 1000)
	s := e.seller(t, inventory.Batch, e.deps("replica-a"))
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[int64]int{}
	var errs []error
	for i := range 64 {
		wg.Go(func() {
			<-start
			o := inventory.Order{ProductID: id, Quantity: 1}
			if i%8 == 0 {
				o.IdempotencyKey = "same-key" // 8 copies of one retried order
			}
			sale, err := s.Sell(ctx, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[sale.ID]++
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("Sell = %v, want a sale", err)
	}
	var transactions, rows int64
	if err := e.pool.QueryRow(ctx, `SELECT count(DISTINCT created_at), count(*) FROM sales WHERE product_id = $1`, id).Scan(&transactions, &rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("64 buyers (8 copies of one keyed order): %d ledger rows in %d transactions", rows, transactions)
	if rows != 57 {
		t.Errorf("%d ledger rows, want 57 (56 plain orders and one keyed order sold once)", rows)
	}
	if transactions*2 > rows {
		t.Errorf("%d ledger rows in %d transactions: want batches (at most half as many transactions as rows)", rows, transactions)
	}
	var keyed int64
	if err := e.pool.QueryRow(ctx, `SELECT id FROM sales WHERE idempotency_key = 'same-key'`).Scan(&keyed); err != nil {
		t.Fatal(err)
	}
	if ids[keyed] != 8 {
		t.Errorf("the 8 copies of the keyed order got sale %d %d times, want 8", keyed, ids[keyed])
	}
	if p := e.checkLedger(t, id); p.Quantity != 1000-57 {
		t.Errorf("stock %d, want %d", p.Quantity, 1000-57)
	}
}

// TestBatchesWithKeysInCommonDoNotDeadlock: two batches of two products
// carry the same Idempotency-Keys in opposite order, at once, many times.
// Each key sells once; the other batch's copy is left to the ledger
// (replay: the key belongs to another product's sale). Inserting in
// arrival order, the two waited on each other's keys and Postgres aborted
// one (40P01): every order in it got an error.
func TestBatchesWithKeysInCommonDoNotDeadlock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.restock(t, "deadlock-a", 10_000)
	e.restock(t, "deadlock-b", 10_000)
	for round := range 40 {
		keys := make([]string, 8)
		for i := range keys {
			keys[i] = fmt.Sprintf("deadlock-%d-%d", round, i)
		}
		batch := func(id string, reversed bool) []inventory.Order {
			orders := make([]inventory.Order, len(keys))
			for i := range keys {
				k := keys[i]
				if reversed {
					k = keys[len(keys)-1-i]
				}
				orders[i] = inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: k}
			}
			return orders
		}
		var wg sync.WaitGroup
		var got [2][]postgres.BatchAnswer
		start := make(chan struct{})
		for b, id := range []string{"deadlock-a", "deadlock-b"} {
			wg.Go(func() {
				<-start
				got[b] = e.store.RecordBatch(ctx, id, inventory.Batch, "replica-a", lock.Fence{}, batch(id, b == 1))
			})
		}
		close(start)
		wg.Wait()
		sold := 0
		for b := range got {
			for i, a := range got[b] {
				switch {
				case a.Err != nil:
					t.Fatalf("round %d, batch %d, order %d: %v; want a sale or a replay", round, b, i, a.Err)
				case !a.Replay:
					sold++
				}
			}
		}
		if sold != len(keys) {
			t.Fatalf("round %d: %d orders sold for %d keys, want each key sold once", round, sold, len(keys))
		}
	}
}

// TestBatchKeyTakenMidBatchWithholdsNothing: a key is taken by a sale of
// another product after the batch looked for taken keys and before its
// write. The batch had allocated the product's last unit to that order; the
// order behind it was refused. Skipped by the write, the keyed order sold
// nothing, so the refusal behind it was false ("0 left: sold out" with 1
// unit in stock); the batch must be decided again with the key known.
func TestBatchKeyTakenMidBatchWithholdsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const id, other, key = "batch-late-key", "batch-late-key-other", "late-key"
	e.restock(t, id, 1)
	e.restock(t, other, 1)

	// Another product's sale takes the key and holds it uncommitted, so
	// the batch's look does not see it and its insert waits on it.
	blocker, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.WithoutCancel(ctx)) }()
	var blockerPID int
	if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `
		WITH ins AS (INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key)
		             VALUES ($1, 1, 1, 'test', 'test', $2))
		UPDATE stock SET quantity = quantity - 1 WHERE product_id = $1`, other, key); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `INSERT INTO round_totals (product_id, round, units, sales) VALUES ($1, 1, 1, 1)`, other); err != nil {
		t.Fatal(err)
	}

	orders := []inventory.Order{
		{ProductID: id, Quantity: 1, IdempotencyKey: key},
		{ProductID: id, Quantity: 1},
	}
	done := make(chan []postgres.BatchAnswer, 1)
	go func() { done <- e.store.RecordBatch(ctx, id, inventory.Batch, "replica-a", lock.Fence{}, orders) }()
	waitFor(t, "the batch's insert to wait for the key's other sale", 10*time.Second, func() bool {
		var n int
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, blockerPID).Scan(&n)
		return err == nil && n > 0
	})
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	answers := <-done
	if a := answers[0]; !a.Replay || a.Err != nil {
		t.Errorf("order 1 (%s) = %+v; want it left to the ledger (its key is another product's sale)", formatOrder(orders[0]), a)
	}
	if a := answers[1]; a.Err != nil || a.Replay || a.Sale.ID == 0 || a.Sale.Remaining != 0 {
		t.Errorf("order 2 (%s) = %+v; want the last unit (the keyed order ahead of it sold nothing)", formatOrder(orders[1]), a)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sales != 1 {
		t.Errorf("after the batch: stock %d, %d ledger rows; want 0 and 1", p.Quantity, p.Sales)
	}
}
