package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Store is the Postgres side of stock: products, the sales ledger and every
// SQL statement the strategies run. Driver errors are translated into this
// package's sentinels here and nowhere else.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool, which must hold the schema of package
// migrations. The caller keeps ownership of pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// commitTimeout bounds a COMMIT. A commit runs detached from the request's
// cancellation: once the sale is decided, a buyer hanging up must not turn
// the outcome into "unknown".
const commitTimeout = 10 * time.Second

// uniqueKeyConstraint is the name migrations give sales' idempotency key.
const uniqueKeyConstraint = "sales_idempotency_key_key"

// errOutcomeUnknown marks an error after which the transaction may or may not
// have committed (COMMIT sent, no answer); it always comes with ErrUnavailable.
var errOutcomeUnknown = errors.New("commit outcome unknown")

// errVersionConflict is an optimistic attempt that lost its compare-and-set.
var errVersionConflict = errors.New("version changed since read")

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return dbErr("ping postgres", err)
	}
	return nil
}

// Product returns id's stock with the ledger's totals for the current round.
func (s *Store) Product(ctx context.Context, id string) (Product, error) {
	if err := ValidateProductID(id); err != nil {
		return Product{}, err
	}
	p := Product{ID: id}
	err := s.pool.QueryRow(ctx, `
		SELECT s.name, s.quantity, s.initial, s.round, s.version,
		       coalesce(l.units, 0), coalesce(l.n, 0)
		FROM stock s
		LEFT JOIN LATERAL (
			SELECT sum(quantity) AS units, count(*) AS n
			FROM sales WHERE product_id = s.product_id AND round = s.round
		) l ON true
		WHERE s.product_id = $1`, id).
		Scan(&p.Name, &p.Quantity, &p.Initial, &p.Round, &p.Version, &p.Sold, &p.Sales)
	if errors.Is(err, pgx.ErrNoRows) {
		return Product{}, fmt.Errorf("product %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Product{}, dbErr("read product", err)
	}
	return p, nil
}

// Ledger returns the number of sales and the units they sold for id's
// current round, straight from the ledger.
func (s *Store) Ledger(ctx context.Context, id string) (count, units int64, err error) {
	if err := ValidateProductID(id); err != nil {
		return 0, 0, err
	}
	err = s.pool.QueryRow(ctx, `
		SELECT count(l.id), coalesce(sum(l.quantity), 0)
		FROM stock s LEFT JOIN sales l ON l.product_id = s.product_id AND l.round = s.round
		WHERE s.product_id = $1
		GROUP BY s.product_id`, id).Scan(&count, &units)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("product %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, 0, dbErr("read ledger", err)
	}
	return count, units, nil
}

// Restock creates or restocks a product: it sets quantity and initial,
// starts a new round (1 for a new product), bumps the version, keeps the old
// name when name is empty, and then deletes the product's Redis counter so
// that the lua strategy reloads it from Postgres.
//
// When Postgres was restocked but the counter could not be deleted, Restock
// returns the product with an error wrapping ErrUnavailable: the lua strategy
// would sell from a stale counter, so the caller should retry.
func Restock(ctx context.Context, st *Store, rdb redis.UniversalClient, id, name string, quantity int64) (Product, error) {
	if err := ValidateProductID(id); err != nil {
		return Product{}, err
	}
	if quantity < 0 {
		return Product{}, fmt.Errorf("%w: restock %q to %d, want at least 0", ErrBadQuantity, id, quantity)
	}
	p := Product{ID: id}
	err := st.pool.QueryRow(ctx, `
		INSERT INTO stock AS s (product_id, name, quantity, initial) VALUES ($1, $2, $3, $3)
		ON CONFLICT (product_id) DO UPDATE SET
			name = CASE WHEN EXCLUDED.name = '' THEN s.name ELSE EXCLUDED.name END,
			quantity = EXCLUDED.quantity,
			initial = EXCLUDED.initial,
			round = s.round + 1,
			version = s.version + 1,
			updated_at = now()
		RETURNING name, quantity, initial, round, version`, id, name, quantity).
		Scan(&p.Name, &p.Quantity, &p.Initial, &p.Round, &p.Version)
	if err != nil {
		return Product{}, dbErr("restock", err)
	}
	if err := rdb.Del(ctx, counterKey(id)).Err(); err != nil {
		return p, redisErr(fmt.Sprintf("restocked %q but could not reset its Redis counter", id), err)
	}
	return p, nil
}

// exists returns ErrNotFound when id has no stock row.
func (s *Store) exists(ctx context.Context, id string) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM stock WHERE product_id = $1`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("product %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return dbErr("find product", err)
	}
	return nil
}

// quantity returns id's stock outside any transaction.
func (s *Store) quantity(ctx context.Context, id string) (int64, error) {
	var q int64
	err := s.pool.QueryRow(ctx, `SELECT quantity FROM stock WHERE product_id = $1`, id).Scan(&q)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("product %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, dbErr("read quantity", err)
	}
	return q, nil
}

// fence returns the highest fencing token id's stock was written with; 0 for
// an unknown product, whose sale fails later with ErrNotFound.
func (s *Store) fence(ctx context.Context, id string) (int64, error) {
	var f int64
	err := s.pool.QueryRow(ctx, `SELECT fence FROM stock WHERE product_id = $1`, id).Scan(&f)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("read fence", err)
	}
	return f, nil
}

// replay looks up the sale recorded under o.IdempotencyKey. It returns the
// sale marked Replayed and found=true when it matches o, ErrIdempotencyConflict
// when the key was used for another product or quantity, and found=false when
// the key is unused. A replayed sale's Remaining is the stock now.
func (s *Store) replay(ctx context.Context, o Order) (sale Sale, found bool, err error) {
	err = s.pool.QueryRow(ctx, `
		SELECT l.id, l.product_id, l.quantity, l.round, l.strategy, l.instance,
		       coalesce(l.fence, 0), l.created_at, s.quantity
		FROM sales l JOIN stock s ON s.product_id = l.product_id
		WHERE l.idempotency_key = $1`, o.IdempotencyKey).
		Scan(&sale.ID, &sale.ProductID, &sale.Quantity, &sale.Round, &sale.Strategy, &sale.Instance,
			&sale.Fence, &sale.CreatedAt, &sale.Remaining)
	if errors.Is(err, pgx.ErrNoRows) {
		return Sale{}, false, nil
	}
	if err != nil {
		return Sale{}, false, dbErr("look up idempotency key", err)
	}
	if sale.ProductID != o.ProductID || sale.Quantity != o.Quantity {
		return Sale{}, true, fmt.Errorf("%w: key %q sold %d of %q, this order is %d of %q",
			ErrIdempotencyConflict, o.IdempotencyKey, sale.Quantity, sale.ProductID, o.Quantity, o.ProductID)
	}
	sale.Replayed = true
	return sale, true, nil
}

// saleTx is one sale's transaction on one product; its methods are the only
// statements a strategy can run inside it.
type saleTx struct {
	tx pgx.Tx
	id string
}

// decrement is what a strategy's decrement left behind, for the ledger row.
type decrement struct {
	remaining int64
	round     int
	fence     int64
}

// read returns the product's quantity, version and round without locking it.
func (t *saleTx) read(ctx context.Context) (quantity, version int64, err error) {
	err = t.tx.QueryRow(ctx, `SELECT quantity, version FROM stock WHERE product_id = $1`, t.id).Scan(&quantity, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("product %q: %w", t.id, ErrNotFound)
	}
	if err != nil {
		return 0, 0, dbErr("read stock", err)
	}
	return quantity, version, nil
}

// readForUpdate returns the product's quantity and holds its row lock until
// the transaction ends.
func (t *saleTx) readForUpdate(ctx context.Context) (int64, error) {
	var q int64
	err := t.tx.QueryRow(ctx, `SELECT quantity FROM stock WHERE product_id = $1 FOR UPDATE`, t.id).Scan(&q)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("product %q: %w", t.id, ErrNotFound)
	}
	if err != nil {
		return 0, dbErr("lock stock row", err)
	}
	return q, nil
}

// Every decrement is relative (quantity - n), so initial - quantity equals
// the ledger's sum whatever the strategy, and bumps version, so an optimistic
// sale racing a sale of another strategy still sees the change.

// decrementBy takes n units whatever is left: the caller checked beforehand,
// and a stale check shows up as negative stock.
func (t *saleTx) decrementBy(ctx context.Context, n int64) (decrement, error) {
	var d decrement
	err := t.tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - $2, version = version + 1, updated_at = now()
		WHERE product_id = $1 RETURNING quantity, round`, t.id, n).Scan(&d.remaining, &d.round)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("product %q: %w", t.id, ErrNotFound)
	}
	if err != nil {
		return d, dbErr("decrement stock", err)
	}
	return d, nil
}

// decrementIfVersion takes n units only if the version is still v; otherwise
// it returns errVersionConflict.
func (t *saleTx) decrementIfVersion(ctx context.Context, n, v int64) (decrement, error) {
	var d decrement
	err := t.tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - $2, version = version + 1, updated_at = now()
		WHERE product_id = $1 AND version = $3 RETURNING quantity, round`, t.id, n, v).Scan(&d.remaining, &d.round)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("compare-and-set on version %d: %w", v, errVersionConflict)
	}
	if err != nil {
		return d, dbErr("decrement stock", err)
	}
	return d, nil
}

// decrementIfEnough takes n units in one conditional statement, returning
// ErrSoldOut when fewer remain and ErrNotFound for an unknown product.
func (t *saleTx) decrementIfEnough(ctx context.Context, n int64) (decrement, error) {
	var d decrement
	err := t.tx.QueryRow(ctx, `
		UPDATE stock SET quantity = quantity - $2, version = version + 1, updated_at = now()
		WHERE product_id = $1 AND quantity >= $2 RETURNING quantity, round`, t.id, n).Scan(&d.remaining, &d.round)
	if errors.Is(err, pgx.ErrNoRows) {
		q, _, err := t.read(ctx)
		if err != nil {
			return d, err
		}
		return d, fmt.Errorf("%d of %q wanted, %d left: %w", n, t.id, q, ErrSoldOut)
	}
	if err != nil {
		return d, dbErr("decrement stock", err)
	}
	return d, nil
}

// claimFence makes this transaction the product's writer under fencing
// token fence and returns the quantity left. Its UPDATE takes the row lock
// first, so it waits for any transaction still holding it (a stale holder
// paused between its decrement and its COMMIT) and then sees that sale; it
// refuses with ErrLockLost when a holder with the same or a newer token has
// claimed the row. Everything the transaction does afterwards runs under the
// row lock, and a stale holder that writes later finds the newer fence.
//
// The comparison is strict because each hold claims once: after Redis loses
// its data mid-sale, the next token is minted above the highest committed
// fence and can equal the in-flight holder's; "<" lets only one of them on.
//
// idleLimit becomes the transaction's idle_in_transaction_session_timeout
// (sent in the same round trip): a holder paused longer than its lease
// inside the transaction has its session ended by Postgres, so its row lock
// cannot stall the next holder for ever.
func (t *saleTx) claimFence(ctx context.Context, fence int64, idleLimit time.Duration) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, strconv.FormatInt(max(idleLimit.Milliseconds(), 1), 10))
	b.Queue(`UPDATE stock SET fence = $2, updated_at = now() WHERE product_id = $1 AND fence < $2 RETURNING quantity`, t.id, fence)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, dbErr("limit idle time", err)
	}
	var q int64
	err := br.QueryRow().Scan(&q)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := br.Close(); err != nil {
			return 0, dbErr("claim fence", err)
		}
		if _, _, err := t.read(ctx); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: fencing token %d is not newer than the last claim on %q", ErrLockLost, fence, t.id)
	}
	if err != nil {
		return 0, dbErr("claim fence", err)
	}
	return q, nil
}

// record runs one sale's transaction: body checks and decrements, then record
// writes the ledger row and commits.
//
// When another sale already committed o.IdempotencyKey, this transaction is
// rolled back and record returns that sale as a replay (or
// ErrIdempotencyConflict). An error wrapping errOutcomeUnknown means COMMIT
// was sent without an answer; every other error means nothing was committed.
func (s *Store) record(ctx context.Context, o Order, strategy, instance string,
	body func(ctx context.Context, t *saleTx) (decrement, error)) (Sale, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Sale{}, dbErr("begin", err)
	}
	defer rollback(ctx, tx)

	d, err := body(ctx, &saleTx{tx: tx, id: o.ProductID})
	if err != nil {
		return Sale{}, err
	}
	sale := Sale{
		ProductID: o.ProductID,
		Quantity:  o.Quantity,
		Remaining: d.remaining,
		Round:     d.round,
		Strategy:  strategy,
		Instance:  instance,
		Fence:     d.fence,
	}
	var key, fence any
	if o.IdempotencyKey != "" {
		key = o.IdempotencyKey
	}
	if d.fence != 0 {
		fence = d.fence
	}
	err = tx.QueryRow(ctx, `
		INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key, fence)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, created_at`,
		o.ProductID, d.round, o.Quantity, strategy, instance, key, fence).Scan(&sale.ID, &sale.CreatedAt)
	if isUniqueViolation(err, uniqueKeyConstraint) {
		// A concurrent sale with the same key won; Postgres reports the
		// violation only once that sale has committed, so it can be read.
		rollback(ctx, tx)
		winner, found, err := s.replay(ctx, o)
		if err == nil && !found {
			err = fmt.Errorf("idempotency key %q: taken but its sale cannot be read", o.IdempotencyKey)
		}
		return winner, err
	}
	if err != nil {
		return Sale{}, dbErr("insert sale", err)
	}
	// A cancelled context (a buyer gone, a lock lost) still stops the sale
	// here; from here on the commit is detached from it.
	if ctx.Err() != nil {
		return Sale{}, fmt.Errorf("before commit: %w", interrupted(ctx))
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return Sale{}, commitErr(err)
	}
	return sale, nil
}

// rollback ends tx if it is still open; it is a no-op after Commit. A failed
// rollback closes the connection, which ends the transaction on the server.
func rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// commitErr classifies a failed COMMIT. The server answering with an error,
// or the command never leaving the client, means nothing was committed;
// anything else (a timeout or a broken connection while waiting for the
// answer) leaves the outcome unknown.
func commitErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
		return dbErr("commit", err)
	}
	return fmt.Errorf("commit: %w: %w: %w", ErrUnavailable, errOutcomeUnknown, err)
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
		switch pgErr.Code[:2] {
		case "08", "53", "57":
			// connection exception, insufficient resources, operator
			// intervention (e.g. 57P01 admin shutdown)
			return fmt.Errorf("postgres: %s: %w: %w", op, ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) {
		// The caller gave up; that says nothing about Postgres.
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return fmt.Errorf("postgres: %s: %w: %w", op, ErrUnavailable, err)
}

// redisErr translates a Redis client error: every failure to get an answer
// from Redis wraps ErrUnavailable.
func redisErr(op string, err error) error {
	return fmt.Errorf("redis: %s: %w: %w", op, ErrUnavailable, err)
}

// interrupted is ctx's error together with its cause, when the cause (e.g. a
// lost lock) says more.
func interrupted(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
