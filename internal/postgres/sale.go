package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/tracing"
)

// ErrVersionConflict is an optimistic attempt that lost its compare-and-set.
var ErrVersionConflict = errors.New("version changed since read")

// Exists returns ErrNotFound when id has no stock row. A product found once
// is remembered: no statement deletes a product.
func (s *Store) Exists(ctx context.Context, id string) error {
	if _, ok := s.known.Load(id); ok {
		return nil
	}
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM stock WHERE product_id = $1`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
	}
	if err != nil {
		return dbErr("find product", err)
	}
	s.known.Store(id, struct{}{})
	return nil
}

// Quantity returns id's stock and round outside any transaction.
func (s *Store) Quantity(ctx context.Context, id string) (q int64, round int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT quantity, round FROM stock WHERE product_id = $1`, id).Scan(&q, &round)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
	}
	if err != nil {
		return 0, 0, dbErr("read quantity", err)
	}
	return q, round, nil
}

// Replay looks up the sale recorded under o.IdempotencyKey. It returns the
// sale marked Replayed and found=true when it matches o, ErrIdempotencyConflict
// when the key was used for another product or quantity, for a final sale
// where o is a hold (or the reverse), or for a hold with another
// pay_within (to the millisecond, as it is written), and found=false when
// the key is unused. A replayed sale's Remaining is the stock it left, as
// its ledger row records (the first answer said so); only a row written
// before the ledger recorded it falls back to the stock now.
func (s *Store) Replay(ctx context.Context, o inventory.Order) (sale inventory.Sale, found bool, err error) {
	var (
		state     string
		payMillis int64 // the hold's pay_within, as written (ms)
	)
	err = s.pool.QueryRow(ctx, `
		SELECT l.id, l.product_id, l.quantity, l.round, l.strategy, l.instance,
		       coalesce(l.fence, 0), l.created_at, coalesce(l.remaining, s.quantity),
		       coalesce(o.id::text, ''), coalesce(o.state, ''), coalesce(o.expires_at, l.created_at),
		       coalesce(round(extract(epoch FROM o.expires_at - o.created_at) * 1000)::bigint, 0)
		FROM sales l JOIN stock s ON s.product_id = l.product_id
		LEFT JOIN orders o ON o.sale_id = l.id
		WHERE l.idempotency_key = $1`, o.IdempotencyKey).
		Scan(&sale.ID, &sale.ProductID, &sale.Quantity, &sale.Round, &sale.Strategy, &sale.Instance,
			&sale.Fence, &sale.CreatedAt, &sale.Remaining, &sale.OrderID, &state, &sale.ExpiresAt, &payMillis)
	if errors.Is(err, pgx.ErrNoRows) {
		return inventory.Sale{}, false, nil
	}
	if err != nil {
		return inventory.Sale{}, false, dbErr("look up idempotency key", err)
	}
	if sale.ProductID != o.ProductID || sale.Quantity != o.Quantity {
		return inventory.Sale{}, true, fmt.Errorf("%w: key %q sold %d of %q, this order is %d of %q",
			inventory.ErrIdempotencyConflict, o.IdempotencyKey, sale.Quantity, sale.ProductID, o.Quantity, o.ProductID)
	}
	if hold := o.PayWithin > 0; hold != (sale.OrderID != "") {
		return inventory.Sale{}, true, fmt.Errorf("%w: key %q was used for %s, this order is %s",
			inventory.ErrIdempotencyConflict, o.IdempotencyKey, saleKind(!hold), saleKind(hold))
	}
	if hold := o.PayWithin > 0; hold && payMillis != o.PayWithin.Milliseconds() {
		return inventory.Sale{}, true, fmt.Errorf("%w: key %q held for pay_within %v, this hold asks %v",
			inventory.ErrIdempotencyConflict, o.IdempotencyKey, time.Duration(payMillis)*time.Millisecond, o.PayWithin)
	}
	sale.OrderState = inventory.OrderState(state)
	sale.Replayed = true
	return sale, true, nil
}

// saleKind names a hold or a final sale, for an error.
func saleKind(hold bool) string {
	if hold {
		return "a hold"
	}
	return "a final sale"
}

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

// Fences are kept per product and per fencing counter (lock.Fence's
// Backend), one row each in fences. Each lock backend counts its tokens on
// its own, and tokens of two independent counters say nothing about each
// other's order: a pglock token compared with a Redis one would refuse
// honest holders. Two holders of different backends do not exclude each
// other anyway; their claims serialise them on the stock row's lock, and
// the guard holds between them.

// claimSQL takes the stock row's lock (its UPDATE waits for a holder still
// in a transaction on it, and then reads the row that holder left), then
// raises the product's fence of counter $3 to token $2, only if the fence
// is below it, and answers the quantity and round only if it did: no row
// for an unknown product and for a token not above the fence. The stock
// row comes first so that the order of claims is the order of the row
// lock, whatever the counter, as when the fences were columns of stock.
const claimSQL = `WITH claimed AS (
	UPDATE stock SET updated_at = now() WHERE product_id = $1 RETURNING quantity, round
), fenced AS (
	INSERT INTO fences (product_id, backend, token) SELECT $1, $3, $2 FROM claimed
	ON CONFLICT (product_id, backend) DO UPDATE SET token = EXCLUDED.token WHERE fences.token < EXCLUDED.token
	RETURNING token
)
SELECT quantity, round FROM claimed WHERE EXISTS (SELECT FROM fenced)`

// ClaimFence makes this transaction the product's writer under fencing
// token f (of counter f.Backend) and returns the quantity left and the
// round. It takes the stock row's lock first (claimSQL), so it waits for
// any transaction still holding it (a stale holder paused between its
// decrement and its COMMIT) and then sees that sale; it refuses when a
// holder with the same or a newer token of the same counter has claimed
// the row, which only a broken lock allows: ErrLockBreach with
// ErrLockLost. Everything the transaction does afterwards runs under the
// row lock, and a stale holder that writes later finds the newer fence. A
// holder paused inside the transaction has its session ended by Postgres
// after Limits.IdleTimeout, so its row lock cannot stall the next holder
// for ever.
//
// The comparison is strict because each hold claims once: after Redis loses
// its data mid-sale, the next token is minted above the highest committed
// fence and can equal the in-flight holder's; "<" lets only one of them on.
func (t *SaleTx) ClaimFence(ctx context.Context, f lock.Fence) (quantity int64, round int, err error) {
	if f.Backend == "" {
		return 0, 0, fmt.Errorf("claim %q with fencing token %d: the token names no counter (lock.Fence.Backend)", t.id, f.Token)
	}
	var q int64
	err = t.tx.QueryRow(ctx, claimSQL, t.id, f.Token, f.Backend).Scan(&q, &round)
	if errors.Is(err, pgx.ErrNoRows) {
		var newest int64
		err := t.tx.QueryRow(ctx, `
			SELECT coalesce(f.token, 0) FROM stock s
			LEFT JOIN fences f ON f.product_id = s.product_id AND f.backend = $2
			WHERE s.product_id = $1`, t.id, f.Backend).Scan(&newest)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, fmt.Errorf("product %q: %w", t.id, inventory.ErrNotFound)
		}
		if err != nil {
			return 0, 0, dbErr("read fence", err)
		}
		return 0, 0, fmt.Errorf("%w: %w: fencing token %d is not newer than %d, the last claim on %q",
			inventory.ErrLockBreach, inventory.ErrLockLost, f.Token, newest, t.id)
	}
	if err != nil {
		return 0, 0, dbErr("claim fence", err)
	}
	return q, round, nil
}

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
	var key *string
	if o.IdempotencyKey != "" {
		key = &o.IdempotencyKey
	}
	saleKey := uuid.NewString()
	row := ledgerRow{productID: o.ProductID, round: d.Round, quantity: o.Quantity, remaining: d.Remaining, key: key, saleKey: saleKey, payWithin: o.PayWithin}
	written, err := writeLedger(ctx, tx, strategy, instance, d.Fence, []ledgerRow{row})
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
	sale = w.sale(row, strategy, instance, d.Fence)
	// A cancelled context (a buyer gone, a lock lost) still stops the sale
	// here; from here on the commit is detached from it.
	if ctx.Err() != nil {
		return inventory.Sale{}, fmt.Errorf("before commit: %w", inventory.Interrupted(ctx))
	}
	if err := s.commit(ctx, tx, o.ProductID, saleKey); err != nil {
		return inventory.Sale{}, err
	}
	return sale, nil
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
// (recorded with it; the stock now for a row without it), and a hold's order.
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
	var (
		left      *int64
		state     string
		expiresAt *time.Time
	)
	err = tx.QueryRow(ctx, `
		SELECT l.id, l.round, l.created_at, l.remaining, coalesce(o.id::text, ''), coalesce(o.state, ''), o.expires_at
		FROM sales l LEFT JOIN orders o ON o.sale_id = l.id WHERE l.sale_key = $1`, saleKey).
		Scan(&sale.ID, &sale.Round, &sale.CreatedAt, &left, &sale.OrderID, &state, &expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr("look up sale", err)
	}
	sale.Remaining = q
	if sale.OrderID != "" {
		sale.OrderState, sale.ExpiresAt = inventory.OrderState(state), *expiresAt
	}
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

// rollback ends tx if it is still open; it is a no-op after Commit. A failed
// rollback closes the connection, which ends the transaction on the server.
func rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// commitErr classifies a failed COMMIT. Only the server answering (with an
// error, or with ROLLBACK) means nothing was committed; anything else (a
// timeout or a broken connection while waiting for the answer) leaves the
// outcome unknown. pgconn.SafeToRetry is no guide here: when the connection
// breaks while COMMIT's answer is awaited, pgx v5.12 reports "conn closed",
// which claims to be safe to retry though COMMIT was sent. The ledger (see
// resolve) answers every case correctly, at the cost of one lookup.
func commitErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return dbErr("commit", err)
	}
	return fmt.Errorf("commit: %w: %w: reply lost: %w", inventory.ErrUnavailable, inventory.ErrOutcomeUnknown, err)
}

// isUniqueViolation reports whether err is Postgres refusing a duplicate in
// the named unique constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// dbErr translates a Postgres driver error. Errors the server reports about
// the statement itself, and the caller cancelling, stay plain errors; the
// server shutting down, refusing connections or running out of resources, and
// every error where no answer came (network, timeout, closed pool), wrap
// ErrUnavailable.
func dbErr(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "55P03": // lock_not_available: Limits.LockTimeout passed
			return fmt.Errorf("postgres: %s: %w: %w", op, inventory.ErrLockTimeout, err)
		case "25P03": // the session ended by Limits.IdleTimeout
			return fmt.Errorf("postgres: %s: %w: %w", op, inventory.ErrUnavailable, err)
		}
		switch pgErr.Code[:2] {
		case "08", "53", "57", "40":
			// connection exception, insufficient resources, operator
			// intervention (e.g. 57P01 admin shutdown), transaction
			// rolled back (40001 serialization failure, 40P01 deadlock):
			// nothing was done, and trying again may work.
			return fmt.Errorf("postgres: %s: %w: %w", op, inventory.ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) {
		// The caller gave up; that says nothing about Postgres.
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return fmt.Errorf("postgres: %s: %w: %w", op, inventory.ErrUnavailable, err)
}
