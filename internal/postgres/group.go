package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// RecordGroup sells orders of any number of products in one transaction
// (group commit across products), each product's orders in arrival order:
// it locks every product's stock row in product order, so that two groups
// with products in common wait for each other in one order and cannot
// deadlock; gives each product's units to its orders while they last (an
// order that does not fit is told ErrSoldOut, a later smaller one of that
// product may still fit); writes the guarded decrement of every product
// and every ledger row as one statement (writeGroup); and commits. The
// answers are in the order of orders.
//
// A product's failure is its own: the orders of an unknown product are
// told ErrNotFound and the others sell; a product whose orders all fail
// writes nothing. When the transaction fails, every order gets the same
// error; a lost COMMIT reply is resolved from the ledger (see resolve) by
// one sale's key, for the whole group at once, since it committed all or
// nothing. Idempotency-Keys are handled as RecordBatch handles them.
func (s *Store) RecordGroup(ctx context.Context, strategy, instance string, orders []inventory.Order) []BatchAnswer {
	return s.recordGroup(ctx, strategy, instance, lock.Fence{}, orders)
}

// recordGroup is RecordGroup, and RecordBatch when fence.Token is not 0:
// then every order is of one product, whose row is claimed with the fence.
// A key taken after the group looked (by a sale committing first) withheld
// the units allocated to it from the orders behind it, so such a
// transaction is rolled back and the group tried again with that key known
// (at most once per key): every answer is decided by a transaction that
// wrote exactly what it allocated.
func (s *Store) recordGroup(ctx context.Context, strategy, instance string, fence lock.Fence, orders []inventory.Order) []BatchAnswer {
	taken := map[string]bool{}
	for {
		answers, late, err := s.writeGroupOnce(ctx, strategy, instance, fence, orders, taken)
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

// lockedStock is one product's stock row as the group locked it.
type lockedStock struct {
	quantity int64
	round    int
}

// writeGroupOnce is one try of recordGroup, with the keys in known taken
// (besides those the ledger shows). It returns the keys that were taken
// between its look and its write, when there were any: it then rolled back,
// and the answers are to be ignored.
func (s *Store) writeGroupOnce(ctx context.Context, strategy, instance string, fence lock.Fence, orders []inventory.Order,
	known map[string]bool) (answers []BatchAnswer, late []string, err error) {
	answers = make([]BatchAnswer, len(orders))
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return nil, nil, dbErr("begin group", err)
	}
	defer rollback(ctx, tx)

	stock, err := lockStock(ctx, tx, fence, orders)
	if err != nil {
		return nil, nil, err
	}

	// An order whose key a committed sale or an order ahead of it in this
	// group has taken is left to the ledger (replay) and gets no units, so
	// that it withholds none from the orders after it.
	taken, err := takenKeys(ctx, tx, orders)
	if err != nil {
		return nil, nil, err
	}
	for k := range known {
		taken[k] = true
	}

	// Allocate each product's units in arrival order.
	left := make(map[string]int64, len(stock))
	for id, st := range stock {
		left[id] = st.quantity
	}
	var rows []ledgerRow
	bySaleKey := map[string]int{}
	for i, o := range orders {
		id := o.ProductID
		st, found := stock[id]
		switch {
		case !found:
			answers[i].Err = fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
			continue
		case o.IdempotencyKey != "" && taken[o.IdempotencyKey]:
			answers[i].Replay = true
			continue
		case o.Quantity > left[id]:
			answers[i].Err = fmt.Errorf("%d of %q wanted, %d left: %w", o.Quantity, id, left[id], inventory.ErrSoldOut)
			continue
		}
		left[id] -= o.Quantity
		var key *string
		if o.IdempotencyKey != "" {
			key = &o.IdempotencyKey
			taken[o.IdempotencyKey] = true
		}
		r := ledgerRow{productID: id, round: st.round, quantity: o.Quantity, remaining: left[id], key: key, saleKey: uuid.NewString(), payWithin: o.PayWithin}
		rows = append(rows, r)
		bySaleKey[r.saleKey] = i
	}
	if len(rows) == 0 {
		return answers, nil, nil // every order refused or replayed; nothing to write
	}

	// What each product gave, in product order.
	var products []string
	var units []int64
	for _, id := range slices.Sorted(maps.Keys(stock)) {
		if gave := stock[id].quantity - left[id]; gave > 0 {
			products = append(products, id)
			units = append(units, gave)
		}
	}
	written, decremented, err := writeGroup(ctx, tx, strategy, instance, fence.Token, products, units, rows)
	if err != nil {
		return nil, nil, err
	}
	if len(written) < len(rows) {
		// A key was taken since takenKeys looked (by a sale committing
		// first): its units were withheld from the orders behind it, so
		// the group is tried again with the key known (see recordGroup).
		for _, r := range rows {
			if _, ok := written[r.saleKey]; !ok {
				late = append(late, *r.key)
			}
		}
		return nil, late, nil // rolled back by the deferred rollback
	}
	if decremented < len(products) {
		// Under the row locks the guard cannot refuse: if it does all the
		// same, the lock broke.
		return nil, nil, fmt.Errorf("group of %d sales of %d products: %w: %w: the guard refused %d of the decrements made under the row locks",
			len(rows), len(products), inventory.ErrLockBreach, inventory.ErrSoldOut, len(products)-decremented)
	}
	// A lost COMMIT reply is resolved from the ledger: all rows or none.
	if err := s.commit(ctx, tx, rows[0].productID, rows[0].saleKey); err != nil {
		return nil, nil, err
	}
	for _, r := range rows {
		answers[bySaleKey[r.saleKey]].Sale = written[r.saleKey].sale(r, strategy, instance, fence.Token)
	}
	return answers, nil, nil
}

// lockStock takes the stock row lock of every product of orders and returns
// each found product's stock and round: in one statement, in product order,
// or, with a lock holder's fence (fence.Token not 0; then the orders are of
// one product), by claiming that product's row (ClaimFence, whose
// ErrNotFound and refusals fail the whole transaction). An unknown product
// is missing from the answer.
func lockStock(ctx context.Context, tx pgx.Tx, fence lock.Fence, orders []inventory.Order) (map[string]lockedStock, error) {
	if fence.Token != 0 {
		id := orders[0].ProductID
		q, round, err := (&SaleTx{tx: tx, id: id}).ClaimFence(ctx, fence)
		if err != nil {
			return nil, err
		}
		return map[string]lockedStock{id: {quantity: q, round: round}}, nil
	}
	ids := make([]string, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, o.ProductID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// NO KEY UPDATE, as an UPDATE of the row takes: it excludes every other
	// sale and restock of the product, but not the key-share locks that
	// other tables' foreign keys to it take.
	rows, err := tx.Query(ctx, `SELECT product_id, quantity, round FROM stock
		WHERE product_id = ANY($1) ORDER BY product_id FOR NO KEY UPDATE`, ids)
	if err != nil {
		return nil, dbErr("lock stock rows", err)
	}
	stock := make(map[string]lockedStock, len(ids))
	var (
		id string
		st lockedStock
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &st.quantity, &st.round}, func() error {
		stock[id] = st
		return nil
	})
	if err != nil {
		return nil, dbErr("lock stock rows", err)
	}
	return stock, nil
}

// groupSQL is a group's whole write as one statement: the guarded
// decrement of units[i] of each products[i] (the count of those the guard
// let through is in every answer row), and
// every ledger row by record_sales, the one writer of the ledger (see
// writeLedger; $1–$10 are its arguments). Postgres runs a data-modifying
// WITH to completion even when no ledger row is written (every key taken
// meanwhile); the group is then rolled back anyway.
const groupSQL = `WITH dec AS (
	UPDATE stock s SET quantity = s.quantity - d.n, version = s.version + 1, updated_at = now()
	FROM unnest($11::text[], $12::bigint[]) AS d(p, n)
	WHERE s.product_id = d.p AND s.quantity >= d.n
	RETURNING s.product_id
)
SELECT (SELECT count(*) FROM dec), r.sale_key, r.sale_id, r.created_at, r.order_id, r.expires_at
FROM record_sales($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) r`

// writeGroup writes a group in one statement (groupSQL): the guarded
// decrement of units[i] of products[i], and rows, by strategy on instance
// under fencing token fence (0: none). The caller holds every product's
// stock row lock. It returns the rows written, by sale key (a row whose
// Idempotency-Key a committed sale has is skipped), and how many products'
// decrements the guard let through.
func writeGroup(ctx context.Context, tx pgx.Tx, strategy, instance string, fence int64, products []string, units []int64,
	rows []ledgerRow) (map[string]written, int, error) {
	res, err := tx.Query(ctx, groupSQL, append(ledgerArgs(strategy, instance, fence, rows), products, units)...)
	if err != nil {
		return nil, 0, dbErr("write group", err)
	}
	out := make(map[string]written, len(rows))
	var decremented int
	for res.Next() {
		var sk string
		var w written
		if err := res.Scan(&decremented, &sk, &w.id, &w.createdAt, &w.order, &w.expiresAt); err != nil {
			res.Close()
			return nil, 0, dbErr("write group", err)
		}
		out[sk] = w
	}
	if err := res.Err(); err != nil {
		return nil, 0, dbErr("write group", err)
	}
	return out, decremented, nil
}
