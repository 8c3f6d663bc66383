// Package pgbreak is pglock's Breaker (package breaker): it finds a
// product's lock in the locks table of the service's Postgres and makes
// the holder's row look expired (expires_at set to Postgres' now, token
// and fence kept), not deleted: deleting it would restart the lock's
// fence at 1, below what the product's pglock fence has seen, and the
// database would refuse every later holder of the product for good, which
// is not an early expiry but a lost fence. An expired row is what a lease
// that ended early looks like on Postgres' clock: the next acquirer takes
// it over with fence+1. The holder cannot notice before its own deadline
// (a pglock lease ends on a local timer and never reads the row back); it
// learns at Release, which answers ErrNotHeld once the row was taken
// over, and the fence orders its write before the next holder's.
package pgbreak

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/lock/breaker"
)

// Breaker is pglock's.
var Breaker = breaker.Breaker{
	Backend: "pglock",
	Where:   "the locks table",
	Open: func(ctx context.Context, s breaker.Servers) (breaker.Locks, bool, error) {
		if s.Postgres == "" {
			return nil, false, nil
		}
		conn, err := pgx.Connect(ctx, s.Postgres)
		if err != nil {
			return nil, false, fmt.Errorf("connect to postgres: %w", err)
		}
		return locks{conn}, true, nil
	},
}

type locks struct{ conn *pgx.Conn }

func (l locks) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
}

func (l locks) Holder(ctx context.Context, name string) (breaker.Holder, bool, error) {
	var token string
	err := l.conn.QueryRow(ctx, `
		SELECT token FROM locks
		WHERE name = $1 AND token IS NOT NULL AND expires_at > clock_timestamp()`, name).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return breaker.Holder{}, false, nil
	}
	if err != nil {
		return breaker.Holder{}, false, fmt.Errorf("read the locks row %s: %w", name, err)
	}
	// Expire, not delete: see the package doc.
	take := func(ctx context.Context) (bool, error) {
		tag, err := l.conn.Exec(ctx, `
			UPDATE locks SET expires_at = clock_timestamp()
			WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()`, name, token)
		if err != nil {
			return false, fmt.Errorf("expire the locks row %s: %w", name, err)
		}
		return tag.RowsAffected() == 1, nil
	}
	return breaker.Holder{ID: token, Take: take}, true, nil
}
