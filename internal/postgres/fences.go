package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// Fences are kept per product and per fencing counter (lock.Fence's
// Backend), one row each in fences. Each lock backend counts its tokens on
// its own, and tokens of two independent counters say nothing about each
// other's order: a pglock token compared with a Redis one would refuse
// honest holders. Two holders of different backends do not exclude each
// other anyway; their claims serialise them on the stock row's lock, and
// the guard holds between them.

// FenceFloor is the fence floor of fencing counter backend (a lock.Fence's
// Backend, e.g. "redislock"), for a lock whose counter can be lost
// (redislock's and redlock's FenceFloor option): the highest token of that
// counter the product's stock row was claimed with, so that a counter lost
// with Redis never restarts below what Postgres has seen. Its key is the
// lock's name (lock:{id}).
func (s *Store) FenceFloor(backend string) func(ctx context.Context, key string) (int64, error) {
	return func(ctx context.Context, key string) (int64, error) {
		id := strings.TrimSuffix(strings.TrimPrefix(key, "lock:{"), "}")
		return s.Fence(ctx, backend, id)
	}
}

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
