package postgres

import (
	"context"
	"errors"
	"fmt"

	"inventory/internal/inventory"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RoundTx is a restock's transaction while it closes the product's
// round: its methods are the only statements the closing may run (it
// holds the product's row lock; the sales queued behind it may hold every
// other connection of the pool).
type RoundTx struct{ tx pgx.Tx }

// DropMarksBefore is Store.DropMarksBefore in the restock's transaction.
func (t *RoundTx) DropMarksBefore(ctx context.Context, holder, id string, round int) error {
	return dropMarksBefore(ctx, t.tx, holder, id, round)
}

// MarkedBefore counts the sold-out marks of product id, recorded by any
// replica for a round before round, that have not run out.
func (t *RoundTx) MarkedBefore(ctx context.Context, id string, round int) (int, error) {
	return markedBefore(ctx, t.tx, id, round)
}

// querier is what runs a one-row query: a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Restock is stock.Restocker's transaction: lock the product's row, answer
// a repeat of an earlier keyed restock, check the precondition, close the
// current round (closeRound, for an existing product), write the new round
// and commit.
func (s *Store) Restock(ctx context.Context, o inventory.RestockOrder,
	closeRound func(ctx context.Context, tx *RoundTx, id string, next int) error) (inventory.Restocked, error) {
	for {
		done, err := s.restockOnce(ctx, o, closeRound)
		if !errors.Is(err, errCreatedMeanwhile) {
			return done, err
		}
	}
}

// errCreatedMeanwhile: the product a restock found missing was created by
// another restock before this one wrote, so this one restocked a round it
// never closed; it rolled back, and is tried again on the product as it is.
var errCreatedMeanwhile = errors.New("created by another restock meanwhile")

func (s *Store) restockOnce(ctx context.Context, o inventory.RestockOrder,
	closeRound func(ctx context.Context, tx *RoundTx, id string, next int) error) (inventory.Restocked, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return inventory.Restocked{}, dbErr("begin restock", err)
	}
	defer rollback(ctx, tx)

	var round int
	exists := true
	err = tx.QueryRow(ctx, `SELECT round FROM stock WHERE product_id = $1 FOR UPDATE`, o.ProductID).Scan(&round)
	if errors.Is(err, pgx.ErrNoRows) {
		exists = false
	} else if err != nil {
		return inventory.Restocked{}, dbErr("lock stock row", err)
	}
	// Looked up under the row lock: a concurrent restock of this product
	// under the same key has committed by now, or not begun.
	if o.IdempotencyKey != "" {
		if earlier, found, err := replayRestock(ctx, tx, o); err != nil || found {
			return earlier, err
		}
	}
	if o.IfRound > 0 && (!exists || round != o.IfRound) {
		if !exists {
			return inventory.Restocked{}, fmt.Errorf("%w: %q does not exist, not in round %d", inventory.ErrRoundMoved, o.ProductID, o.IfRound)
		}
		return inventory.Restocked{}, fmt.Errorf("%w: %q is in round %d, not %d; nothing was restocked", inventory.ErrRoundMoved, o.ProductID, round, o.IfRound)
	}
	// A new product is announced too (round stays 0): the replicas then know
	// a sell-out announced for no round of it is stale.
	if err := closeRound(ctx, &RoundTx{tx: tx}, o.ProductID, round+1); err != nil {
		return inventory.Restocked{}, err
	}

	restockKey := uuid.NewString()
	var key, asked any
	if o.IdempotencyKey != "" {
		key, asked = o.IdempotencyKey, o.Name
	}
	p := inventory.Product{ID: o.ProductID}
	// The new round is remembered in rounds in the same statement, so every
	// round's initial stays known after the next restock.
	err = tx.QueryRow(ctx, `
		WITH s AS (
			INSERT INTO stock AS s (product_id, name, quantity, initial) VALUES ($1, $2, $3, $3)
			ON CONFLICT (product_id) DO UPDATE SET
				name = CASE WHEN EXCLUDED.name = '' THEN s.name ELSE EXCLUDED.name END,
				quantity = EXCLUDED.quantity,
				initial = EXCLUDED.initial,
				round = s.round + 1,
				version = s.version + 1,
				updated_at = now()
			RETURNING product_id, name, quantity, initial, round, version
		), r AS (
			INSERT INTO rounds (product_id, round, initial, idempotency_key, asked_name, name, version, restock_key)
			SELECT product_id, round, initial, $4, $5, name, version, $6 FROM s
		)
		SELECT name, quantity, initial, round, version FROM s`, o.ProductID, o.Name, o.Quantity, key, asked, restockKey).
		Scan(&p.Name, &p.Quantity, &p.Initial, &p.Round, &p.Version)
	if isUniqueViolation(err, roundsKeyConstraint) {
		// The key's restock, of another product, committed first.
		rollback(ctx, tx)
		earlier, found, err := replayRestock(ctx, s.pool, o)
		if err == nil && !found {
			err = fmt.Errorf("idempotency key %q: taken but its restock cannot be read", o.IdempotencyKey)
		}
		return earlier, err
	}
	if err != nil {
		return inventory.Restocked{}, dbErr("restock", err)
	}
	if !exists && p.Round != 1 {
		return inventory.Restocked{}, errCreatedMeanwhile
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.limits.CommitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		if cerr := commitErr(err); !errors.Is(cerr, inventory.ErrOutcomeUnknown) {
			return inventory.Restocked{}, cerr
		}
		return s.resolveRestock(ctx, p, restockKey, err)
	}
	return inventory.Restocked{Product: p}, nil
}

// roundsKeyConstraint is the name migrations give rounds' idempotency key.
const roundsKeyConstraint = "rounds_idempotency_key_key"

// replayRestock looks up the restock recorded under o.IdempotencyKey: its
// answer, marked Replayed, when it matches o; ErrIdempotencyConflict when
// the key was used for another product, quantity or name; found=false when
// the key is unused.
func replayRestock(ctx context.Context, q querier, o inventory.RestockOrder) (done inventory.Restocked, found bool, err error) {
	var asked string
	err = q.QueryRow(ctx, `
		SELECT product_id, round, initial, coalesce(asked_name, ''), coalesce(name, ''), coalesce(version, 0)
		FROM rounds WHERE idempotency_key = $1`, o.IdempotencyKey).
		Scan(&done.ID, &done.Round, &done.Initial, &asked, &done.Name, &done.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return inventory.Restocked{}, false, nil
	}
	if err != nil {
		return inventory.Restocked{}, false, dbErr("look up restock key", err)
	}
	if done.ID != o.ProductID || done.Initial != o.Quantity || asked != o.Name {
		return inventory.Restocked{}, true, fmt.Errorf("%w: key %q restocked %q to %d (name %q); this restock is %q to %d (name %q)",
			inventory.ErrIdempotencyConflict, o.IdempotencyKey, done.ID, done.Initial, asked, o.ProductID, o.Quantity, o.Name)
	}
	done.Quantity, done.Replayed = done.Initial, true
	return done, true, nil
}

// resolveRestock finds out from rounds whether a restock whose COMMIT reply
// was lost (cause) committed, as resolve does for a sale: it waits for the
// product's row lock, which the restock held until it ended.
func (s *Store) resolveRestock(ctx context.Context, p inventory.Product, restockKey string, cause error) (inventory.Restocked, error) {
	err := s.committed(ctx, "commit restock", cause, func(ctx context.Context, begin string) (bool, error) {
		return s.lookupRestock(ctx, begin, p.ID, restockKey)
	})
	if err != nil {
		return inventory.Restocked{}, err
	}
	return inventory.Restocked{Product: p}, nil
}

// lookupRestock reports whether the restock under restockKey committed,
// once product id's row lock is free.
func (s *Store) lookupRestock(ctx context.Context, begin, id, restockKey string) (bool, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
	if err != nil {
		return false, dbErr("begin lookup", err)
	}
	defer rollback(ctx, tx)
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM stock WHERE product_id = $1 FOR SHARE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // a new product whose restock did not commit
	}
	if err != nil {
		return false, dbErr("wait for the product's row", err)
	}
	err = tx.QueryRow(ctx, `SELECT 1 FROM rounds WHERE restock_key = $1`, restockKey).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr("look up restock", err)
	}
	return true, nil
}
