package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/internal/inventory"
)

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

// interrupted is ctx's error together with its cause, when the cause (e.g. a
// lost lock) says more.
func interrupted(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
