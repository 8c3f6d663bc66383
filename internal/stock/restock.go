package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// ErrRoundMoved: a restock's precondition (RestockOrder.IfRound, an HTTP
// If-Match) named a round that is no longer the product's; nothing changed.
var ErrRoundMoved = errors.New("the product is no longer in that round")

// RestockOrder is an admin's restock of one product (PUT /products/{id}).
type RestockOrder struct {
	ProductID string
	// Name is the product's new name; "" keeps the old one.
	Name string
	// Quantity is the new round's stock, 0 or more.
	Quantity int64
	// IfRound, when above 0, restocks only a product whose current round
	// it is; otherwise (another round, or no such product) ErrRoundMoved
	// and nothing changes. A retry of a restock that did happen then
	// changes nothing either.
	IfRound int
	// IdempotencyKey, when not empty, makes a repeat of this restock answer
	// the first one's result and start no round; the key used for another
	// request gives ErrIdempotencyConflict.
	IdempotencyKey string
}

// Restocked is what a restock did, as Postgres has it.
type Restocked struct {
	// Product is the product right after the restock: its new round, with
	// Quantity and Initial the order's quantity and nothing sold.
	Product
	// Replayed is true when an earlier restock under the same
	// Idempotency-Key is answered again.
	Replayed bool
	// ResetErr, when not nil, is why the product's Redis keys (lua's
	// counter, setnx's lock) could not be deleted after the commit. The
	// restock happened all the same, and nothing depends on the delete:
	// lua checks a counter against Postgres before it refuses anyone, and
	// a reservation of an older round is refused by the round guard.
	ResetErr error
}

// Restocker makes restocks. Store and Redis are required.
type Restocker struct {
	Store *Store
	Redis redis.UniversalClient
	// Marks, when set, is this replica's memory of sold-out products: a
	// restock through this replica makes it forget the product at once,
	// rather than when the announcement comes back from Redis.
	Marks *SoldOut
}

// restockMarkWait bounds how long a restock waits for the sold-out marks of
// older rounds to go (Restock). Marks last a replica's
// INVENTORY_SOLD_OUT_TTL (1 s by default) when their replica does not hear
// the announcement; a replica configured with more than this keeps every
// restock of a product it marked failing until its mark runs out.
const restockMarkWait = 30 * time.Second

// Restock creates a product (round 1) or restocks it: it sets quantity and
// initial, starts a new round, bumps the version, and keeps the old name
// when o.Name is empty. It is safe while sales are in flight, and safe to
// retry with o.IfRound or o.IdempotencyKey.
//
// No replica answers "sold out" from memory for an older round once the new
// round has units, not even for a moment (a buyer told 409 by one replica
// while another already sells the new round's units would have been told
// something no order of events explains). So the restock locks the
// product's row first (sales wait; no sold-out mark can be recorded, since
// recording one reads the row FOR SHARE), announces the new round to the
// replicas, which drop their marks, and waits until no mark of an older
// round is recorded and running in Postgres (a replica that does not hear
// the announcement has its mark run out, within its ttl); only then does it
// write the new round and commit. Every sold-out answer from memory is thus
// true of the round it was given in, and that round was current.
//
// The answer is Postgres's: when the restock committed, it returns the new
// round whatever Redis does afterwards (see Restocked.ResetErr); when the
// COMMIT reply is lost, the round is looked up by the restock's own key.
// An error means nothing changed, except one wrapping ErrOutcomeUnknown.
func (r Restocker) Restock(ctx context.Context, o RestockOrder) (Restocked, error) {
	if err := ValidateProductID(o.ProductID); err != nil {
		return Restocked{}, err
	}
	if o.Quantity < 0 {
		return Restocked{}, fmt.Errorf("%w: restock %q to %d, want at least 0", ErrBadQuantity, o.ProductID, o.Quantity)
	}
	done, err := r.Store.restock(ctx, o, r.closeRound)
	if err != nil {
		return done, err
	}
	if !done.Replayed {
		// The setnx strategy's key goes too: a holder of the old round has
		// nothing left to protect, and a key left without a TTL must not
		// outlive a restock.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisResetTimeout)
		defer cancel()
		if err := r.Redis.Del(dctx, counterKey(o.ProductID), setNXKey(o.ProductID)).Err(); err != nil {
			done.ResetErr = redisErr(fmt.Sprintf("restocked %q but could not delete its Redis counter", o.ProductID), err)
		} else {
			// Announced again now that the round is committed: what a
			// replica keeps of the old round besides its marks (an open
			// circuit's refusals, see SoldOut.OnRestock) is looked at
			// again. Best effort; those have bounds of their own.
			_ = announceRestock(dctx, r.Redis, o.ProductID, done.Round)
		}
	}
	return done, nil
}

// announceTimeout bounds a restock's announcement, which Redis may not
// answer (down, or cut off); the restock's transaction polls meanwhile.
const announceTimeout = time.Second

// redisResetTimeout bounds the delete of a restocked product's Redis keys.
const redisResetTimeout = 2 * time.Second

// closeRound is called by Store.restock with the product's row locked,
// before the new round is written: it makes the replicas drop their
// sold-out marks of rounds before next and returns once none is recorded
// and running. It reads and writes through tx, the restock's own
// transaction, and nothing else of Postgres: the sales queued behind the
// row may hold every other connection of the pool.
func (r Restocker) closeRound(ctx context.Context, tx pgx.Tx, id string, next int) error {
	if r.Marks != nil {
		r.Marks.restockedThrough(ctx, tx, id, next)
	}
	// Best effort, and brief (sales of the product wait meanwhile): a
	// replica that does not hear it has its mark run out. Sent beside the
	// polls, which keep the transaction busy: Postgres ends a transaction
	// idle for Limits.IdleTimeout (a lock TTL, as short as 1 s), and Redis
	// may take announceTimeout not to answer.
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		actx, cancel := context.WithTimeout(ctx, announceTimeout)
		defer cancel()
		_ = announceRestock(actx, r.Redis, id, next)
	}()
	defer func() { <-announced }()
	deadline := time.Now().Add(restockMarkWait)
	for {
		n, err := markedBefore(ctx, tx, id, next)
		if err != nil {
			return err
		}
		select {
		case <-announced:
			if n == 0 {
				return nil
			}
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d replica(s) still answer %q sold out from memory after %s (INVENTORY_SOLD_OUT_TTL longer than that?); nothing was restocked",
				ErrUnavailable, n, id, restockMarkWait)
		}
		if err := pause(ctx, markPoll); err != nil {
			return err
		}
	}
}

// Restock restocks product id to quantity, keeping its name when name is
// empty, with no precondition and no idempotency key (see Restocker).
func Restock(ctx context.Context, st *Store, rdb redis.UniversalClient, id, name string, quantity int64) (Product, error) {
	done, err := Restocker{Store: st, Redis: rdb}.Restock(ctx, RestockOrder{ProductID: id, Name: name, Quantity: quantity})
	return done.Product, err
}

// querier is what runs a one-row query: a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// restock is Restocker.Restock's transaction: lock the product's row, answer
// a repeat of an earlier keyed restock, check the precondition, close the
// current round (closeRound, for an existing product), write the new round
// and commit.
func (s *Store) restock(ctx context.Context, o RestockOrder,
	closeRound func(ctx context.Context, tx pgx.Tx, id string, next int) error) (Restocked, error) {
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

func (s *Store) restockOnce(ctx context.Context, o RestockOrder,
	closeRound func(ctx context.Context, tx pgx.Tx, id string, next int) error) (Restocked, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.begin})
	if err != nil {
		return Restocked{}, dbErr("begin restock", err)
	}
	defer rollback(ctx, tx)

	var round int
	exists := true
	err = tx.QueryRow(ctx, `SELECT round FROM stock WHERE product_id = $1 FOR UPDATE`, o.ProductID).Scan(&round)
	if errors.Is(err, pgx.ErrNoRows) {
		exists = false
	} else if err != nil {
		return Restocked{}, dbErr("lock stock row", err)
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
			return Restocked{}, fmt.Errorf("%w: %q does not exist, not in round %d", ErrRoundMoved, o.ProductID, o.IfRound)
		}
		return Restocked{}, fmt.Errorf("%w: %q is in round %d, not %d; nothing was restocked", ErrRoundMoved, o.ProductID, round, o.IfRound)
	}
	// A new product is announced too (round stays 0): the replicas then know
	// a sell-out announced for no round of it is stale.
	if err := closeRound(ctx, tx, o.ProductID, round+1); err != nil {
		return Restocked{}, err
	}

	restockKey := uuid.NewString()
	var key, asked any
	if o.IdempotencyKey != "" {
		key, asked = o.IdempotencyKey, o.Name
	}
	p := Product{ID: o.ProductID}
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
		return Restocked{}, dbErr("restock", err)
	}
	if !exists && p.Round != 1 {
		return Restocked{}, errCreatedMeanwhile
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.limits.CommitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		if cerr := commitErr(err); !errors.Is(cerr, ErrOutcomeUnknown) {
			return Restocked{}, cerr
		}
		return s.resolveRestock(ctx, p, restockKey, err)
	}
	return Restocked{Product: p}, nil
}

// roundsKeyConstraint is the name migrations give rounds' idempotency key.
const roundsKeyConstraint = "rounds_idempotency_key_key"

// replayRestock looks up the restock recorded under o.IdempotencyKey: its
// answer, marked Replayed, when it matches o; ErrIdempotencyConflict when
// the key was used for another product, quantity or name; found=false when
// the key is unused.
func replayRestock(ctx context.Context, q querier, o RestockOrder) (done Restocked, found bool, err error) {
	var asked string
	err = q.QueryRow(ctx, `
		SELECT product_id, round, initial, coalesce(asked_name, ''), coalesce(name, ''), coalesce(version, 0)
		FROM rounds WHERE idempotency_key = $1`, o.IdempotencyKey).
		Scan(&done.ID, &done.Round, &done.Initial, &asked, &done.Name, &done.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return Restocked{}, false, nil
	}
	if err != nil {
		return Restocked{}, false, dbErr("look up restock key", err)
	}
	if done.ID != o.ProductID || done.Initial != o.Quantity || asked != o.Name {
		return Restocked{}, true, fmt.Errorf("%w: key %q restocked %q to %d (name %q); this restock is %q to %d (name %q)",
			ErrIdempotencyConflict, o.IdempotencyKey, done.ID, done.Initial, asked, o.ProductID, o.Quantity, o.Name)
	}
	done.Quantity, done.Replayed = done.Initial, true
	return done, true, nil
}

// resolveRestock finds out from rounds whether a restock whose COMMIT reply
// was lost (cause) committed, as resolve does for a sale: it waits for the
// product's row lock, which the restock held until it ended.
func (s *Store) resolveRestock(ctx context.Context, p Product, restockKey string, cause error) (Restocked, error) {
	err := s.committed(ctx, "commit restock", cause, func(ctx context.Context, begin string) (bool, error) {
		return s.lookupRestock(ctx, begin, p.ID, restockKey)
	})
	if err != nil {
		return Restocked{}, err
	}
	return Restocked{Product: p}, nil
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
