package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// BatchAnswer is one order's outcome in a batch.
type BatchAnswer struct {
	Sale inventory.Sale
	Err  error
	// replay: the order's Idempotency-Key was already taken (by an earlier
	// sale, or an order ahead of it in this batch); its answer is looked up
	// in the ledger after the batch ends.
	Replay bool
}

// RecordBatch sells orders, all of product id and in arrival order, in one
// transaction, as RecordGroup sells a group (one statement locks the row,
// one writes the guarded decrement and every ledger row), claiming the row
// with the lock's fencing token fence when its Token is not 0 (see
// ClaimFence: a refusal, like an unknown product, fails every order). The
// answers are in the order of orders. When the transaction fails, every
// order gets the same error; a lost COMMIT reply is resolved from the
// ledger (see resolve), for the whole batch at once, since it committed
// all or nothing.
//
// An order whose Idempotency-Key a committed sale has is left to the ledger
// (replay) and withholds no units. A key can also be taken after the batch
// looked (by a sale of another product committing first); its row is then
// skipped by the write, and the units allocated to it were withheld from the
// orders behind it, which may have been refused while units remained. So
// such a transaction is rolled back and the batch tried again with that key
// known (at most once per key): every answer is decided by a transaction
// that wrote exactly what it allocated.
func (s *Store) RecordBatch(ctx context.Context, id, strategy, instance string, fence lock.Fence, orders []inventory.Order) []BatchAnswer {
	for _, o := range orders {
		if o.ProductID != id {
			return AnswerAll(orders, fmt.Errorf("a batch of %q holds an order of %q: a batch is of one product", id, o.ProductID))
		}
	}
	if len(orders) == 0 {
		return nil
	}
	return s.recordGroup(ctx, strategy, instance, fence, orders)
}

// takenKeys returns the Idempotency-Keys of orders that a sale in the
// ledger already has.
func takenKeys(ctx context.Context, tx pgx.Tx, orders []inventory.Order) (map[string]bool, error) {
	taken := map[string]bool{}
	var keys []string
	for _, o := range orders {
		if o.IdempotencyKey != "" {
			keys = append(keys, o.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return taken, nil
	}
	rows, err := tx.Query(ctx, `SELECT idempotency_key FROM sales WHERE idempotency_key = ANY($1)`, keys)
	if err != nil {
		return nil, dbErr("read taken keys", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbErr("read taken keys", err)
	}
	for _, k := range found {
		taken[k] = true
	}
	return taken, nil
}

// AnswerAll answers every order with err.
func AnswerAll(orders []inventory.Order, err error) []BatchAnswer {
	answers := make([]BatchAnswer, len(orders))
	for i := range answers {
		answers[i].Err = err
	}
	return answers
}
