package postgres

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RecordMark records that holder marks product id sold out for ttl, if its
// stock row shows nothing left; it reports whether it did. The row is read
// FOR SHARE, so a restock's UPDATE either waits for this record to commit
// (and its wait sees it) or commits first (and nothing is recorded). A
// mark of the same round never shortens the record: two marks of one holder
// in flight at once may reach memory in either order, and the record must
// outlast whichever did (else a restock could stop waiting for a mark
// still answering).
func (s *Store) RecordMark(ctx context.Context, holder, id string, ttl time.Duration) (bool, error) {
	var round int
	err := s.pool.QueryRow(ctx, `
		WITH s AS (SELECT product_id, round FROM stock WHERE product_id = $2 AND quantity < 1 FOR SHARE)
		INSERT INTO soldout_marks (holder, product_id, round, expires_at)
		SELECT $1, product_id, round, clock_timestamp() + $3 * interval '1 microsecond' FROM s
		ON CONFLICT (product_id, holder) DO UPDATE SET round = EXCLUDED.round,
			expires_at = CASE WHEN soldout_marks.round = EXCLUDED.round
				THEN greatest(soldout_marks.expires_at, EXCLUDED.expires_at) ELSE EXCLUDED.expires_at END
		RETURNING round`, holder, id, ttl.Microseconds()).Scan(&round)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr("record sold-out mark", err)
	}
	return true, nil
}

// DropMarks deletes holder's sold-out marks: of product id, or all of them
// when id is "".
func (s *Store) DropMarks(ctx context.Context, holder, id string) error {
	return s.DropMarksBefore(ctx, holder, id, math.MaxInt32)
}

// DropMarksBefore deletes holder's sold-out marks of product id (all
// products when id is "") recorded for a round before round. A restock
// drops only the older rounds' marks: a mark of the new round recorded
// while the restock is being forgotten (its buyer began after, and the new
// round sold out already) is true, and deleting its record would leave it
// answering in memory with nothing for the next restock to wait on.
func (s *Store) DropMarksBefore(ctx context.Context, holder, id string, round int) error {
	return dropMarksBefore(ctx, s.pool, holder, id, round)
}

// execer runs a statement: a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// DropMarksBefore is Store.DropMarksBefore through db.
func dropMarksBefore(ctx context.Context, db execer, holder, id string, round int) error {
	_, err := db.Exec(ctx, `DELETE FROM soldout_marks WHERE holder = $1 AND ($2 = '' OR product_id = $2) AND round < $3`, holder, id, round)
	if err != nil {
		return dbErr("drop sold-out marks", err)
	}
	return nil
}

// markedBefore counts the sold-out marks of product id, recorded by any
// replica for a round before round, that have not run out.
func markedBefore(ctx context.Context, q querier, id string, round int) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT count(*) FROM soldout_marks
		WHERE product_id = $1 AND round < $2 AND expires_at > clock_timestamp()`, id, round).Scan(&n)
	if err != nil {
		return 0, dbErr("read sold-out marks", err)
	}
	return n, nil
}

// MarkedBefore counts the sold-out marks of product id, recorded by any
// replica for a round before round, that have not run out.
func (s *Store) MarkedBefore(ctx context.Context, id string, round int) (int, error) {
	return markedBefore(ctx, s.pool, id, round)
}
