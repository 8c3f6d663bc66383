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

// batchAnswer is one order's outcome in a batch.
type BatchAnswer struct {
	Sale inventory.Sale
	Err  error
	// replay: the order's Idempotency-Key was already taken (by an earlier
	// sale, or an order ahead of it in this batch); its answer is looked up
	// in the ledger after the batch ends.
	Replay bool
}

// recordBatch sells orders, all of product id and in arrival order, in one
// transaction: it locks the stock row once (claiming it with the lock's
// fencing token fence when its Token is not 0, see claimFence), gives each
// order its units while they last (an order that does not fit is told
// ErrSoldOut, a later smaller one may still fit), writes every ledger row in
// one statement with the stock's guarded decrement, and commits. The answers
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

// recordBatchOnce is one try of recordBatch, with the keys in known taken
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
	var (
		quantities, remainders []int64
		keys                   []*string
		saleKeys               []string
		bySaleKey              = map[string]int{}
	)
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
		sk := uuid.NewString()
		quantities, remainders, keys = append(quantities, o.Quantity), append(remainders, left), append(keys, key)
		saleKeys = append(saleKeys, sk)
		bySaleKey[sk] = i
	}
	if len(saleKeys) == 0 {
		return answers, nil, nil // every order refused or replayed; nothing to write
	}

	// The ledger rows, each with the stock it left, and the guarded
	// decrement of what they sold, in one statement. A row whose
	// Idempotency-Key was taken since takenKeys looked (by a sale of
	// another product) is skipped and not decremented, and the batch is
	// tried again (see recordBatch). Rows are inserted in key order, so two
	// batches with keys in common wait for each other in one order and
	// cannot deadlock.
	rows, err := tx.Query(ctx, `
		WITH ins AS (
			INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key, sale_key, fence, remaining)
			SELECT $1, $2, t.q, $3, $4, t.k, t.sk, nullif($8::bigint, 0), t.r
			FROM unnest($5::bigint[], $6::text[], $7::text[], $9::bigint[]) WITH ORDINALITY AS t(q, k, sk, r, n)
			ORDER BY t.k NULLS LAST, t.n
			ON CONFLICT (idempotency_key) DO NOTHING
			RETURNING id, sale_key, quantity, created_at
		), dec AS (
			UPDATE stock SET quantity = quantity - (SELECT coalesce(sum(quantity), 0) FROM ins),
			                 version = version + 1, updated_at = now()
			WHERE product_id = $1 AND quantity >= (SELECT coalesce(sum(quantity), 0) FROM ins)
			RETURNING quantity
		), tot AS (
			-- The round's totals (migrations/00009_round_totals.sql), when
			-- the guard took the units (else the batch fails as a whole);
			-- the stock row is locked above, so round_totals comes second
			-- for every writer.
			INSERT INTO round_totals AS t (product_id, round, units, sales)
			SELECT $1, $2, sum(quantity), count(*) FROM ins
			WHERE EXISTS (SELECT FROM dec) HAVING count(*) > 0
			ON CONFLICT (product_id, round) DO UPDATE SET units = t.units + EXCLUDED.units, sales = t.sales + EXCLUDED.sales
		)
		SELECT ins.id, ins.sale_key, ins.created_at, (SELECT quantity FROM dec) FROM ins`,
		id, round, strategy, instance, quantities, keys, saleKeys, fence.Token, remainders)
	if err != nil {
		return nil, nil, dbErr("write batch", err)
	}
	written := map[int]inventory.Sale{}
	var firstKey string
	var decremented bool
	for rows.Next() {
		var sk string
		var sale inventory.Sale
		var remaining *int64
		if err := rows.Scan(&sale.ID, &sk, &sale.CreatedAt, &remaining); err != nil {
			rows.Close()
			return nil, nil, dbErr("write batch", err)
		}
		decremented = remaining != nil
		if firstKey == "" {
			firstKey = sk
		}
		written[bySaleKey[sk]] = sale
	}
	if err := rows.Err(); err != nil {
		return nil, nil, dbErr("write batch", err)
	}
	if len(written) < len(saleKeys) {
		for _, i := range bySaleKey {
			if _, ok := written[i]; !ok {
				late = append(late, orders[i].IdempotencyKey)
			}
		}
		return nil, late, nil // rolled back by the deferred rollback
	}
	if !decremented {
		// The row lock makes this impossible; the guard refused all the same.
		return nil, nil, fmt.Errorf("batch of %d on %q: %w: %w: the guard refused a Decrement made under the row lock", len(written), id, inventory.ErrLockBreach, inventory.ErrSoldOut)
	}

	// A lost COMMIT reply is resolved from the ledger: all rows or none.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.limits.CommitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		if cerr := commitErr(err); !errors.Is(cerr, inventory.ErrOutcomeUnknown) {
			return nil, nil, cerr
		}
		if _, err := s.resolve(ctx, inventory.Sale{ProductID: id}, firstKey, err); err != nil {
			return nil, nil, err
		}
	}

	for i, sk := range saleKeys {
		o, sale := orders[bySaleKey[sk]], written[bySaleKey[sk]]
		sale.ProductID, sale.Quantity, sale.Remaining, sale.Round = id, o.Quantity, remainders[i], round
		sale.Strategy, sale.Instance, sale.Fence = strategy, instance, fence.Token
		answers[bySaleKey[sk]].Sale = sale
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
