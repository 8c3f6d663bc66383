package stock

import (
	"context"
	"fmt"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/redis"

	goredis "github.com/redis/go-redis/v9"
)

// Restocker makes restocks. Store and Redis are required.
type Restocker struct {
	Store *postgres.Store
	Redis goredis.UniversalClient
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
func (r Restocker) Restock(ctx context.Context, o inventory.RestockOrder) (inventory.Restocked, error) {
	if err := inventory.ValidateProductID(o.ProductID); err != nil {
		return inventory.Restocked{}, err
	}
	if o.Quantity < 0 {
		return inventory.Restocked{}, fmt.Errorf("%w: restock %q to %d, want at least 0", inventory.ErrBadQuantity, o.ProductID, o.Quantity)
	}
	done, err := r.Store.Restock(ctx, o, r.closeRound)
	if err != nil {
		return done, err
	}
	if !done.Replayed {
		// The setnx strategy's key goes too: a holder of the old round has
		// nothing left to protect, and a key left without a TTL must not
		// outlive a restock.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisResetTimeout)
		defer cancel()
		if err := redis.NewCounter(r.Redis).Reset(dctx, o.ProductID); err != nil {
			done.ResetErr = err
		} else {
			// Announced again now that the round is committed: what a
			// replica keeps of the old round besides its marks (an open
			// circuit's refusals, see SoldOut.OnRestock) is looked at
			// again. Best effort; those have bounds of their own.
			_ = redis.AnnounceRestock(dctx, r.Redis, o.ProductID, done.Round)
		}
	}
	return done, nil
}

// announceTimeout bounds a restock's announcement, which Redis may not
// answer (down, or cut off); the restock's transaction polls meanwhile.
const announceTimeout = time.Second

// redisResetTimeout bounds the delete of a restocked product's Redis keys.
const redisResetTimeout = 2 * time.Second

// closeRound is called by Store.Restock with the product's row locked,
// before the new round is written: it makes the replicas drop their
// sold-out marks of rounds before next and returns once none is recorded
// and running. It reads and writes through tx, the restock's own
// transaction, and nothing else of Postgres: the sales queued behind the
// row may hold every other connection of the pool.
func (r Restocker) closeRound(ctx context.Context, tx *postgres.RoundTx, id string, next int) error {
	if r.Marks != nil {
		r.Marks.restockedThrough(ctx, tx, id, next)
	}
	return awaitUnmarked(ctx, tx, id, next, func(ctx context.Context) error {
		return redis.AnnounceRestock(ctx, r.Redis, id, next)
	})
}

// Reopen is a return's postgres.Reopen: called with the product's row
// locked, before a cancelled, expired or refunded order's units go back
// into round round's stock, it makes the replicas drop their sold-out
// marks of the product and returns once none is recorded and running, as
// closeRound does for a restock. So once a return has been answered, no
// replica answers "sold out" from memory for units it gave back.
func (r Restocker) Reopen(ctx context.Context, tx *postgres.RoundTx, id string, round int) error {
	if r.Marks != nil {
		r.Marks.returnedThrough(ctx, tx, id, round)
	}
	return awaitUnmarked(ctx, tx, id, round+1, func(ctx context.Context) error {
		if r.Redis == nil {
			return nil // no replica hears: their marks run out by their ttl
		}
		return redis.AnnounceReturn(ctx, r.Redis, id)
	})
}

// awaitUnmarked announces (to every replica, which drops its marks of
// product id on hearing it) and waits until no mark of id of a round
// before round is recorded and running, through tx.
func awaitUnmarked(ctx context.Context, tx *postgres.RoundTx, id string, round int, announce func(context.Context) error) error {
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
		_ = announce(actx)
	}()
	defer func() { <-announced }()
	deadline := time.Now().Add(restockMarkWait)
	for {
		n, err := tx.MarkedBefore(ctx, id, round)
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
			return fmt.Errorf("%w: %d replica(s) still answer %q sold out from memory after %s (INVENTORY_SOLD_OUT_TTL longer than that?); nothing changed",
				inventory.ErrUnavailable, n, id, restockMarkWait)
		}
		if err := inventory.Sleep(ctx, markPoll); err != nil {
			return err
		}
	}
}

// Restock restocks product id to quantity, keeping its name when name is
// empty, with no precondition and no idempotency key (see Restocker).
func Restock(ctx context.Context, st *postgres.Store, rdb goredis.UniversalClient, id, name string, quantity int64) (inventory.Product, error) {
	done, err := Restocker{Store: st, Redis: rdb}.Restock(ctx, inventory.RestockOrder{ProductID: id, Name: name, Quantity: quantity})
	return done.Product, err
}
