package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
	"inventory/internal/tracing"
)

// ErrVersionConflict is an optimistic attempt that lost its compare-and-set.
var ErrVersionConflict = errors.New("version changed since read")

// SaleTx is one sale's transaction on one product; its methods are the only
// statements a strategy can run inside it.
type SaleTx struct {
	tx pgx.Tx
	id string
}

// ProductID is the product the transaction sells.
func (t *SaleTx) ProductID() string { return t.id }

// Decrement is what a strategy's decrement left behind, for the ledger row.
type Decrement struct {
	Remaining int64
	Round     int
	// Fence is the fencing token the decrement was made under, 0 if none.
	Fence int64
}

// Read returns the product's quantity, version and round without locking it.
func (t *SaleTx) Read(ctx context.Context) (quantity, version int64, err error) {
	err = t.tx.QueryRow(ctx, `SELECT quantity, version FROM stock WHERE product_id = $1`, t.id).Scan(&quantity, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("product %q: %w", t.id, inventory.ErrNotFound)
	}
	if err != nil {
		return 0, 0, dbErr("read stock", err)
	}
	return quantity, version, nil
}

// ReadForUpdate returns the product's quantity and holds its row lock until
// the transaction ends.
func (t *SaleTx) ReadForUpdate(ctx context.Context) (int64, error) {
	var q int64
	err := t.tx.QueryRow(ctx, `SELECT quantity FROM stock WHERE product_id = $1 FOR UPDATE`, t.id).Scan(&q)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("product %q: %w", t.id, inventory.ErrNotFound)
	}
	if err != nil {
		return 0, dbErr("lock stock row", err)
	}
	return q, nil
}

// Every decrement is relative (quantity - n), so initial - quantity equals
// the ledger's sum whatever the strategy, and bumps version, so an optimistic
// sale racing a sale of another strategy still sees the change.

// DecrementBy takes n units whatever is left: the caller checked beforehand,
// and a stale check shows up as negative stock. Only the unsafe strategies
// (none, local) write this way.
func (t *SaleTx) DecrementBy(ctx context.Context, n int64) (Decrement, error) {
	var d Decrement
	err := t.tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - $2, version = version + 1, updated_at = now()
		WHERE product_id = $1 RETURNING quantity, round`, t.id, n).Scan(&d.Remaining, &d.Round)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("product %q: %w", t.id, inventory.ErrNotFound)
	}
	if err != nil {
		return d, dbErr("Decrement stock", err)
	}
	return d, nil
}

// DecrementIfVersion takes n units only if the version is still v (and, as
// every safe write, only if n units are left); otherwise it returns
// errVersionConflict.
func (t *SaleTx) DecrementIfVersion(ctx context.Context, n, v int64) (Decrement, error) {
	var d Decrement
	err := t.tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - $2, version = version + 1, updated_at = now()
		WHERE product_id = $1 AND version = $3 AND quantity >= $2 RETURNING quantity, round`, t.id, n, v).Scan(&d.Remaining, &d.Round)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("compare-and-set on version %d: %w", v, ErrVersionConflict)
	}
	if err != nil {
		return d, dbErr("Decrement stock", err)
	}
	return d, nil
}

// DecrementIfEnough is the guarded write every safe strategy ends with: it
// takes n units in one conditional statement, returning ErrSoldOut when
// fewer remain and ErrNotFound for an unknown product.
func (t *SaleTx) DecrementIfEnough(ctx context.Context, n int64) (Decrement, error) {
	return t.DecrementIfEnoughIn(ctx, n, 0)
}

// DecrementIfEnoughIn is DecrementIfEnough restricted to round (0: any
// round). When the product has moved on to another round it returns
// errRoundChanged and takes nothing.
func (t *SaleTx) DecrementIfEnoughIn(ctx context.Context, n int64, round int) (Decrement, error) {
	var d Decrement
	err := t.tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - $2, version = version + 1, updated_at = now()
		WHERE product_id = $1 AND quantity >= $2 AND ($3 = 0 OR round = $3)
		RETURNING quantity, round`, t.id, n, round).Scan(&d.Remaining, &d.Round)
	if errors.Is(err, pgx.ErrNoRows) {
		var q int64
		var now int
		err := t.tx.QueryRow(ctx, `SELECT quantity, round FROM stock WHERE product_id = $1`, t.id).Scan(&q, &now)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return d, fmt.Errorf("product %q: %w", t.id, inventory.ErrNotFound)
		case err != nil:
			return d, dbErr("read stock", err)
		case round != 0 && now != round:
			return d, fmt.Errorf("%q is in round %d, not %d: %w", t.id, now, round, ErrRoundChanged)
		}
		return d, fmt.Errorf("%d of %q wanted, %d left: %w", n, t.id, q, inventory.ErrSoldOut)
	}
	if err != nil {
		return d, dbErr("Decrement stock", err)
	}
	return d, nil
}

// ErrRoundChanged: a restock started a new round between a sale's
// reservation and its write.
var ErrRoundChanged = errors.New("restocked meanwhile")

// Record runs one sale's transaction: body checks and decrements, then record
// writes the ledger row, under a key unique to this sale, and commits.
//
// When another sale already committed o.IdempotencyKey, this transaction is
// rolled back and record returns that sale as a replay (or
// ErrIdempotencyConflict). When COMMIT was sent but its answer never came,
// record finds the outcome in the ledger by the sale's key (see resolve);
// only when it cannot does it return an error wrapping ErrOutcomeUnknown.
// Every other error means nothing was committed.
func (s *Store) Record(ctx context.Context, o inventory.Order, strategy, instance string,
	body func(ctx context.Context, t *SaleTx) (Decrement, error)) (sale inventory.Sale, err error) {
	ctx, span := tracing.Span(ctx, "postgres.transaction")
	defer func() { tracing.End(span, err) }()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return inventory.Sale{}, dbErr("begin", err)
	}
	defer rollback(ctx, tx)

	d, err := body(ctx, &SaleTx{tx: tx, id: o.ProductID})
	if err != nil {
		return inventory.Sale{}, err
	}
	sale = inventory.Sale{
		ProductID: o.ProductID,
		Quantity:  o.Quantity,
		Remaining: d.Remaining,
		Round:     d.Round,
		Strategy:  strategy,
		Instance:  instance,
		Fence:     d.Fence,
	}
	var key *string
	if o.IdempotencyKey != "" {
		key = &o.IdempotencyKey
	}
	saleKey := uuid.NewString()
	written, err := writeLedger(ctx, tx, o.ProductID, d.Round, strategy, instance, d.Fence,
		[]ledgerRow{{quantity: o.Quantity, remaining: d.Remaining, key: key, saleKey: saleKey}})
	if err != nil {
		return inventory.Sale{}, err
	}
	w, ok := written[saleKey]
	if !ok {
		// A concurrent sale with the same key won; Postgres skips the row
		// only once that sale has committed, so it can be read.
		rollback(ctx, tx)
		winner, found, err := s.Replay(ctx, o)
		if err == nil && !found {
			err = fmt.Errorf("idempotency key %q: taken but its sale cannot be read", o.IdempotencyKey)
		}
		return winner, err
	}
	sale.ID, sale.CreatedAt = w.id, w.createdAt
	// A cancelled context (a buyer gone, a lock lost) still stops the sale
	// here; from here on the commit is detached from it.
	if ctx.Err() != nil {
		return inventory.Sale{}, fmt.Errorf("before commit: %w", interrupted(ctx))
	}
	if err := s.commit(ctx, tx, o.ProductID, saleKey); err != nil {
		return inventory.Sale{}, err
	}
	return sale, nil
}

// ledgerRow is one sale for writeLedger to record.
type ledgerRow struct {
	quantity  int64
	remaining int64   // the stock the sale left
	key       *string // its Idempotency-Key; nil for none
	saleKey   string  // unique to this sale, to find it after a lost COMMIT reply
}

// written is what the ledger gave a row it recorded.
type written struct {
	id        int64
	createdAt time.Time
}

// writeLedger is the one writer of the ledger: it records rows, sales of
// product id in round round by strategy on instance under fencing token
// fence (0: none), and adds them to the round's totals (see
// migrations/00009_round_totals.sql), in one statement, after the
// caller's decrement has taken the stock row's lock (so the stock row is
// always locked first, round_totals second). A row whose Idempotency-Key a
// committed sale has is skipped (Postgres first waits for a transaction
// still holding the key to end); the answer holds the rows written, by
// sale key. Rows go in key order, so two writers with keys in common wait
// for each other in one order and cannot deadlock.
func writeLedger(ctx context.Context, tx pgx.Tx, id string, round int, strategy, instance string, fence int64,
	rows []ledgerRow) (map[string]written, error) {
	quantities, remainders := make([]int64, len(rows)), make([]int64, len(rows))
	keys, saleKeys := make([]*string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		quantities[i], remainders[i], keys[i], saleKeys[i] = r.quantity, r.remaining, r.key, r.saleKey
	}
	res, err := tx.Query(ctx, `
		WITH ins AS (
			INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key, sale_key, fence, remaining)
			SELECT $1, $2, t.q, $3, $4, t.k, t.sk, nullif($8::bigint, 0), t.r
			FROM unnest($5::bigint[], $6::text[], $7::text[], $9::bigint[]) WITH ORDINALITY AS t(q, k, sk, r, n)
			ORDER BY t.k NULLS LAST, t.n
			ON CONFLICT (idempotency_key) DO NOTHING
			RETURNING id, sale_key, quantity, created_at
		), tot AS (
			INSERT INTO round_totals AS t (product_id, round, units, sales)
			SELECT $1, $2, sum(quantity), count(*) FROM ins HAVING count(*) > 0
			ON CONFLICT (product_id, round) DO UPDATE SET units = t.units + EXCLUDED.units, sales = t.sales + EXCLUDED.sales
		)
		SELECT id, sale_key, created_at FROM ins`,
		id, round, strategy, instance, quantities, keys, saleKeys, fence, remainders)
	if err != nil {
		return nil, dbErr("write sales", err)
	}
	out := make(map[string]written, len(rows))
	for res.Next() {
		var sk string
		var w written
		if err := res.Scan(&w.id, &sk, &w.createdAt); err != nil {
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

// commit commits tx, a sale's or a batch's, whose ledger rows include
// saleKey's. A COMMIT whose reply was lost is resolved from the ledger
// (see resolve): nil when it committed after all.
func (s *Store) commit(ctx context.Context, tx pgx.Tx, id, saleKey string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.limits.CommitTimeout)
	defer cancel()
	_, span := tracing.Span(ctx, "postgres.commit")
	err := tx.Commit(cctx)
	tracing.End(span, err)
	if err == nil {
		return nil
	}
	if cerr := commitErr(err); !errors.Is(cerr, inventory.ErrOutcomeUnknown) {
		return cerr
	}
	_, err = s.resolve(ctx, inventory.Sale{ProductID: id}, saleKey, err)
	return err
}

// resolve finds out from the ledger whether a sale whose COMMIT reply was
// lost (cause, the driver's error) committed: its sale when it did, an
// ErrUnavailable error when it certainly did not, and an error wrapping
// ErrOutcomeUnknown only when the ledger could not be read in time (Postgres
// restarting, say), retrying meanwhile.
//
// The answer is final because the lookup first waits for the product's row
// lock, which the sale's transaction took with its decrement and holds until
// it ends: committed, rolled back, or ended by Postgres after
// Limits.IdleTimeout when its COMMIT never arrived.
func (s *Store) resolve(ctx context.Context, sale inventory.Sale, saleKey string, cause error) (inventory.Sale, error) {
	err := s.committed(ctx, "commit", cause, func(ctx context.Context, begin string) (bool, error) {
		return s.lookup(ctx, begin, saleKey, &sale)
	})
	if err != nil {
		return inventory.Sale{}, err
	}
	return sale, nil
}

// committed finds out whether a transaction whose COMMIT reply was lost
// (cause, the driver's error) committed, by lookup, which looks for what it
// wrote once the product's row lock, held by that transaction until it
// ended, is free (begin is the lookup's BEGIN, with lock and idle timeouts
// past Limits.IdleTimeout: by then Postgres has ended it, whatever became
// of it). nil when it did; an ErrUnavailable error when it certainly did
// not; an error wrapping ErrOutcomeUnknown only when Postgres could not be
// read in time (restarting, say), retrying meanwhile.
func (s *Store) committed(ctx context.Context, op string, cause error, lookup func(ctx context.Context, begin string) (bool, error)) error {
	wait := s.limits.IdleTimeout + resolveMargin
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+s.limits.CommitTimeout)
	defer cancel()
	begin := beginWith(wait, wait)
	for attempt := 0; ; attempt++ {
		found, err := lookup(rctx, begin)
		switch {
		case err == nil && found:
			return nil
		case err == nil:
			return fmt.Errorf("%s: %w: the reply was lost (%v) and the database shows it did not commit", op, inventory.ErrUnavailable, cause)
		}
		unknown := fmt.Errorf("%s: %w: %w: the reply was lost (%v) and the database cannot tell: %w", op, inventory.ErrUnavailable, inventory.ErrOutcomeUnknown, cause, err)
		if !errors.Is(err, inventory.ErrUnavailable) {
			return unknown
		}
		select {
		case <-rctx.Done():
			return unknown
		case <-time.After(retryWait(attempt)):
		}
	}
}

// lookup reads the sale recorded under saleKey into sale once the product's
// row lock is free (see resolve), with Remaining the stock the sale left
// (recorded with it; the stock now for a row without it).
func (s *Store) lookup(ctx context.Context, begin, saleKey string, sale *inventory.Sale) (found bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
	if err != nil {
		return false, dbErr("begin lookup", err)
	}
	defer rollback(ctx, tx)
	var q int64
	err = tx.QueryRow(ctx, `SELECT quantity FROM stock WHERE product_id = $1 FOR SHARE`, sale.ProductID).Scan(&q)
	if err != nil {
		return false, dbErr("wait for the product's row", err)
	}
	var left *int64
	err = tx.QueryRow(ctx, `SELECT id, round, created_at, remaining FROM sales WHERE sale_key = $1`, saleKey).
		Scan(&sale.ID, &sale.Round, &sale.CreatedAt, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr("look up sale", err)
	}
	sale.Remaining = q
	if left != nil {
		sale.Remaining = *left
	}
	return true, nil
}

// retryWait is the wait before the attempt'th retry of a lookup that found
// Postgres unavailable: 50 ms, doubling, at most a second.
func retryWait(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 5), time.Second)
}
