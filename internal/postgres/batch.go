package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
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
// transaction: it locks the stock row once (claiming it with the lock's
// fencing token fence when its Token is not 0, see ClaimFence), gives each
// order its units while they last (an order that does not fit is told
// ErrSoldOut, a later smaller one may still fit), decrements what it gave
// guarded, writes every ledger row (writeLedger, the one writer of the
// ledger, as for a single sale) and commits. The answers
// are in the order of orders. When the transaction fails, every order gets
// the same error; a lost COMMIT reply is resolved from the ledger (see
// resolve), for the whole batch at once, since it committed all or nothing.
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
	taken := map[string]bool{}
	for {
		answers, late, err := s.writeBatchOnce(ctx, id, strategy, instance, fence, orders, taken)
		if err != nil {
			return AnswerAll(orders, err)
		}
		if len(late) == 0 {
			return answers
		}
		for _, k := range late {
			taken[k] = true
		}
	}
}

// writeBatchOnce is one try of RecordBatch, with the keys in known taken
// (besides those the ledger shows). It returns the keys that were taken
// between its look and its write, when there were any: it then rolled back,
// and the answers are to be ignored.
func (s *Store) writeBatchOnce(ctx context.Context, id, strategy, instance string, fence lock.Fence, orders []inventory.Order,
	known map[string]bool) (answers []BatchAnswer, late []string, err error) {
	answers = make([]BatchAnswer, len(orders))
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return nil, nil, dbErr("begin batch", err)
	}
	defer rollback(ctx, tx)

	var stock int64
	var round int
	if fence.Token != 0 {
		stock, round, err = (&SaleTx{tx: tx, id: id}).ClaimFence(ctx, fence)
	} else {
		err = tx.QueryRow(ctx, `SELECT quantity, round FROM stock WHERE product_id = $1 FOR UPDATE`, id).Scan(&stock, &round)
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
		} else if err != nil {
			err = dbErr("lock stock row", err)
		}
	}
	if err != nil {
		return nil, nil, err
	}

	// An order whose key a committed sale or an order ahead of it in this
	// batch has taken is left to the ledger (replay) and gets no units, so
	// that it withholds none from the orders after it.
	taken, err := takenKeys(ctx, tx, orders)
	if err != nil {
		return nil, nil, err
	}
	for k := range known {
		taken[k] = true
	}

	// Allocate in arrival order.
	left := stock
	var rows []ledgerRow
	bySaleKey := map[string]int{}
	for i, o := range orders {
		if o.IdempotencyKey != "" && taken[o.IdempotencyKey] {
			answers[i].Replay = true
			continue
		}
		if o.Quantity > left {
			answers[i].Err = fmt.Errorf("%d of %q wanted, %d left: %w", o.Quantity, id, left, inventory.ErrSoldOut)
			continue
		}
		left -= o.Quantity
		var key *string
		if o.IdempotencyKey != "" {
			key = &o.IdempotencyKey
			taken[o.IdempotencyKey] = true
		}
		r := ledgerRow{productID: id, round: round, quantity: o.Quantity, remaining: left, key: key, saleKey: uuid.NewString(), payWithin: o.PayWithin}
		rows = append(rows, r)
		bySaleKey[r.saleKey] = i
	}
	if len(rows) == 0 {
		return answers, nil, nil // every order refused or replayed; nothing to write
	}

	// The guarded decrement of everything allocated, then the ledger rows,
	// each with the stock it left, by the one ledger writer. Under the row
	// lock the guard cannot refuse: if it does all the same, the lock broke.
	if _, err := (&SaleTx{tx: tx, id: id}).DecrementIfEnough(ctx, stock-left); err != nil {
		if errors.Is(err, inventory.ErrSoldOut) {
			err = fmt.Errorf("batch of %d on %q: %w: %w: the guard refused a decrement made under the row lock", len(rows), id, inventory.ErrLockBreach, err)
		}
		return nil, nil, err
	}
	written, err := writeLedger(ctx, tx, strategy, instance, fence.Token, rows)
	if err != nil {
		return nil, nil, err
	}
	if len(written) < len(rows) {
		// A key was taken since takenKeys looked (by a sale of another
		// product): its units were withheld from the orders behind it, so
		// the batch is tried again with the key known (see RecordBatch).
		for _, r := range rows {
			if _, ok := written[r.saleKey]; !ok {
				late = append(late, *r.key)
			}
		}
		return nil, late, nil // rolled back by the deferred rollback
	}
	// A lost COMMIT reply is resolved from the ledger: all rows or none.
	if err := s.commit(ctx, tx, id, rows[0].saleKey); err != nil {
		return nil, nil, err
	}
	for _, r := range rows {
		answers[bySaleKey[r.saleKey]].Sale = written[r.saleKey].sale(r, strategy, instance, fence.Token)
	}
	return answers, nil, nil
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
