package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/inventory"
)

// Store is the Postgres side of stock: products, the sales ledger and every
// SQL statement the strategies run. Driver errors are translated into this
// package's sentinels here and nowhere else.
type Store struct {
	pool *pgxpool.Pool
	// reads is where the anonymous reads run (Limits.Reads, else pool).
	reads  *pgxpool.Pool
	limits Limits
	// begin starts a sale's transaction with the limits, in one round trip.
	begin string
	// newest is the count of the newest sales that cursors far behind are
	// answered with (see SalesSince).
	newest newestSales
	// liveOrders is the last order count of the live page's products
	// (see OrderCounts).
	liveOrders liveOrders
	// liveRounds is the last read of the live page's rounds (see Rounds).
	liveRounds liveRounds
	// known holds the ids Exists found (products are never deleted), so
	// that a lock sale asks Postgres once per product, not once per sale.
	known sync.Map
}

// Limits bound every sale transaction, so that no holder, however slow or
// paused, keeps a hot product's row from everyone else. The zero value
// takes the defaults.
type Limits struct {
	// LockTimeout is the longest a statement waits for a row lock (Postgres
	// lock_timeout); past it the sale fails with ErrLockTimeout. Default 10s.
	LockTimeout time.Duration
	// IdleTimeout is the longest a sale's transaction may sit idle between
	// statements (idle_in_transaction_session_timeout): Postgres ends the
	// session of a holder paused longer, releasing its row lock. It must
	// exceed Deps.WorkDelay, which some strategies spend inside the
	// transaction. Default 10s.
	IdleTimeout time.Duration
	// Reads, when set, is where the reads anyone may make (Product, Round,
	// Ledger, Products, SalesSince) run: a small pool of their own, with a
	// statement_timeout, cannot take the connections sales need. Default:
	// the Store's pool.
	Reads *pgxpool.Pool
	// NewestSales is how old the count of the newest sales may be that
	// SalesSince answers a cursor far behind with (a new live page's
	// ?since=0): one count per this, whatever the number of readers; and
	// how old the live page's order counts may be (OrderCounts). Default 1s.
	NewestSales time.Duration
	// CommitTimeout bounds a COMMIT, which runs detached from the request's
	// cancellation: once the sale is decided, a buyer hanging up must not
	// turn the outcome into "unknown". Past it the outcome is looked up in
	// the ledger. Default 10s.
	CommitTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.LockTimeout <= 0 {
		l.LockTimeout = 10 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 10 * time.Second
	}
	if l.NewestSales <= 0 {
		l.NewestSales = time.Second
	}
	if l.CommitTimeout <= 0 {
		l.CommitTimeout = 10 * time.Second
	}
	return l
}

// NewStore returns a Store on pool, which must hold the schema of package
// migrations, with its transactions bounded by limits. The caller keeps
// ownership of pool.
func NewStore(pool *pgxpool.Pool, limits Limits) *Store {
	limits = limits.withDefaults()
	reads := limits.Reads
	if reads == nil {
		reads = pool
	}
	return &Store{pool: pool, reads: reads, limits: limits, begin: beginWith(limits.LockTimeout, limits.IdleTimeout)}
}

// beginWith is a BEGIN that sets the transaction's lock and idle timeouts in
// the same round trip (pgx sends an argument-less query as one simple-protocol
// message, which may hold several statements).
func beginWith(lockTimeout, idleTimeout time.Duration) string {
	return fmt.Sprintf("BEGIN; SET LOCAL lock_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d",
		max(lockTimeout.Milliseconds(), 1), max(idleTimeout.Milliseconds(), 1))
}

// resolveMargin is how much longer than Limits.IdleTimeout resolving a lost
// COMMIT reply may wait for the product's row: by then Postgres has ended
// the transaction whatever became of it.
const resolveMargin = 5 * time.Second

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return dbErr("ping postgres", err)
	}
	return nil
}

// Product returns id's stock with the ledger's totals for the current round.
func (s *Store) Product(ctx context.Context, id string) (inventory.Product, error) {
	if err := inventory.ValidateProductID(id); err != nil {
		return inventory.Product{}, err
	}
	p := inventory.Product{ID: id}
	// The ledger's totals come from round_totals, which the statement
	// writing each ledger row keeps: one row, however long the round (a
	// sum of the round's rows cost a reader about 2 ms of Postgres for
	// 4,000 sales), read in the same snapshot as the stock row.
	err := s.reads.QueryRow(ctx, `
		SELECT s.name, s.quantity, s.initial, s.round, s.version,
		       coalesce(t.units - t.returned, 0), coalesce(t.sales, 0), coalesce(t.returned, 0)
		FROM stock s
		LEFT JOIN round_totals t ON t.product_id = s.product_id AND t.round = s.round
		WHERE s.product_id = $1`, id).
		Scan(&p.Name, &p.Quantity, &p.Initial, &p.Round, &p.Version, &p.Sold, &p.Sales, &p.Returned)
	if errors.Is(err, pgx.ErrNoRows) {
		return inventory.Product{}, fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
	}
	if err != nil {
		return inventory.Product{}, dbErr("read product", err)
	}
	return p, nil
}

// Ledger returns the number of sales and the units they took and kept for
// id's current round (less the units returned to it), straight from the
// ledger and the returns.
func (s *Store) Ledger(ctx context.Context, id string) (count, units int64, err error) {
	if err := inventory.ValidateProductID(id); err != nil {
		return 0, 0, err
	}
	err = s.reads.QueryRow(ctx, `
		SELECT count(l.id), coalesce(sum(l.quantity), 0) - (
		           SELECT coalesce(sum(quantity), 0) FROM returns r
		           WHERE r.product_id = s.product_id AND r.round = s.round AND r.restored)
		FROM stock s LEFT JOIN sales l ON l.product_id = s.product_id AND l.round = s.round
		WHERE s.product_id = $1
		GROUP BY s.product_id, s.round`, id).Scan(&count, &units)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
	}
	if err != nil {
		return 0, 0, dbErr("read ledger", err)
	}
	return count, units, nil
}

// Round returns round n of product id from the ledger: ErrNotFound when the
// product or the round does not exist.
func (s *Store) Round(ctx context.Context, id string, n int) (inventory.Round, error) {
	if err := inventory.ValidateProductID(id); err != nil {
		return inventory.Round{}, err
	}
	r := inventory.Round{ProductID: id, Round: n}
	err := s.reads.QueryRow(ctx, `
		SELECT r.initial, r.round = s.round, coalesce(t.units - t.returned, 0), coalesce(t.sales, 0), coalesce(t.returned, 0)
		FROM rounds r JOIN stock s ON s.product_id = r.product_id
		LEFT JOIN round_totals t ON t.product_id = r.product_id AND t.round = r.round
		WHERE r.product_id = $1 AND r.round = $2`, id, n).
		Scan(&r.Initial, &r.Current, &r.Sold, &r.Sales, &r.Returned)
	if errors.Is(err, pgx.ErrNoRows) {
		return inventory.Round{}, fmt.Errorf("product %q round %d: %w", id, n, inventory.ErrNotFound)
	}
	if err != nil {
		return inventory.Round{}, dbErr("read round", err)
	}
	return r, nil
}

// Fence returns the highest fencing token of counter backend (a
// lock.Fence's Backend) that id's stock row was claimed with; 0 when none
// was, and for an unknown product, whose sale fails later with
// ErrNotFound.
func (s *Store) Fence(ctx context.Context, backend, id string) (int64, error) {
	return s.token(ctx, "read fence", `SELECT token FROM fences WHERE product_id = $1 AND backend = $2`, id, backend)
}

// token is the one fencing token sql reads, or 0 when it reads no row.
func (s *Store) token(ctx context.Context, op, sql string, args ...any) (int64, error) {
	var f int64
	err := s.pool.QueryRow(ctx, sql, args...).Scan(&f)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr(op, err)
	}
	return f, nil
}

// Pool is the pool the store writes through, for a lock backend that keeps
// its locks in the same Postgres (pglock).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// FenceFloor is the fence floor of fencing counter backend (a lock.Fence's
// Backend, e.g. "redislock"), for a lock whose counter can be lost
// (redislock's and redlock's FenceFloor option): the highest token of that
// counter the product's stock row was claimed with, so that a counter lost
// with Redis never restarts below what Postgres has seen. Its key is the
// lock's name: a product's (lock:{id}), whose floor is in fences, a
// periodic job's (lock:job:{name}), whose floor is in job_fences, or an
// order's (lock:order:{id}), whose steps write no token (floor 0).
func (s *Store) FenceFloor(backend string) func(ctx context.Context, key string) (int64, error) {
	return func(ctx context.Context, key string) (int64, error) {
		if job, ok := strings.CutPrefix(key, "lock:job:{"); ok {
			return s.JobFence(ctx, backend, strings.TrimSuffix(job, "}"))
		}
		if strings.HasPrefix(key, "lock:order:{") {
			return 0, nil
		}
		id := strings.TrimSuffix(strings.TrimPrefix(key, "lock:{"), "}")
		return s.Fence(ctx, backend, id)
	}
}

// JobFence returns the highest fencing token of counter backend that
// periodic job's runners claimed (see ExpireDue); 0 when none did.
func (s *Store) JobFence(ctx context.Context, backend, job string) (int64, error) {
	return s.token(ctx, "read job fence", `SELECT token FROM job_fences WHERE job = $1 AND backend = $2`, job, backend)
}
