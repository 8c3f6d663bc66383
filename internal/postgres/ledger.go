package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
)

// ledgerRow is one sale for writeLedger to record.
type ledgerRow struct {
	productID string
	round     int
	quantity  int64
	remaining int64   // the stock the sale left
	key       *string // its Idempotency-Key; nil for none
	saleKey   string  // unique to this sale, to find it after a lost COMMIT reply
	// payWithin, when above 0, makes the sale a hold: an order is written
	// beside it, held until this long after the sale.
	payWithin time.Duration
}

// written is what the ledger gave a row it recorded.
type written struct {
	id        int64
	createdAt time.Time
	// order and expiresAt are a hold's order and payment deadline.
	order     string
	expiresAt time.Time
}

// sale is the answer for row r, written as w, by strategy on instance
// under fencing token fence (0: none).
func (w written) sale(r ledgerRow, strategy, instance string, fence int64) inventory.Sale {
	sale := inventory.Sale{ID: w.id, ProductID: r.productID, Quantity: r.quantity, Remaining: r.remaining, Round: r.round,
		Strategy: strategy, Instance: instance, Fence: fence, CreatedAt: w.createdAt}
	if w.order != "" {
		sale.OrderID, sale.OrderState, sale.ExpiresAt = w.order, inventory.Held, w.expiresAt
	}
	return sale
}

// writeLedger records rows, sales by strategy on instance under fencing
// token fence (0: none), in one statement: the SQL function record_sales
// (migrations/00014_one_statement_sale.sql), the one writer of the ledger,
// which also adds them to their rounds' totals and writes a hold's order.
// The caller has taken each row's stock row lock first (stock before
// round_totals, always). A row whose Idempotency-Key a committed sale has
// is skipped (Postgres first waits for a transaction still holding the
// key to end); the answer holds the rows written, by sale key.
func writeLedger(ctx context.Context, tx pgx.Tx, strategy, instance string, fence int64, rows []ledgerRow) (map[string]written, error) {
	res, err := tx.Query(ctx, `SELECT sale_key, sale_id, created_at, order_id, expires_at
		FROM record_sales($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, ledgerArgs(strategy, instance, fence, rows)...)
	if err != nil {
		return nil, dbErr("write sales", err)
	}
	out := make(map[string]written, len(rows))
	for res.Next() {
		var sk string
		var w written
		if err := res.Scan(&sk, &w.id, &w.createdAt, &w.order, &w.expiresAt); err != nil {
			res.Close()
			return nil, dbErr("write sales", err)
		}
		out[sk] = w
	}
	if err := res.Err(); err != nil {
		return nil, dbErr("write sales", err)
	}
	return out, nil
}

// ledgerArgs are record_sales's ten arguments for rows, by strategy on
// instance under fencing token fence: one array per column, then the
// three values every row shares.
func ledgerArgs(strategy, instance string, fence int64, rows []ledgerRow) []any {
	n := len(rows)
	products, rounds := make([]string, n), make([]int32, n)
	quantities, remainders, payMillis := make([]int64, n), make([]int64, n), make([]int64, n)
	keys, saleKeys := make([]*string, n), make([]string, n)
	for i, r := range rows {
		products[i], rounds[i], quantities[i], remainders[i] = r.productID, int32(r.round), r.quantity, r.remaining
		keys[i], saleKeys[i], payMillis[i] = r.key, r.saleKey, r.payWithin.Milliseconds()
	}
	return []any{products, rounds, quantities, keys, saleKeys, remainders, payMillis, strategy, instance, fence}
}
