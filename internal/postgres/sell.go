package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/tracing"
)

// sellSQL calls the sell procedure (migrations/00014_one_statement_sale.sql):
// one sale, its check, fence, guarded decrement and ledger row, in one
// statement that Postgres commits on its own, outside any transaction
// block. Its OUT arguments are passed as NULL and come back as the row.
const sellSQL = `CALL sell($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`

// SellGuarded sells o by the guarded write alone, in one round trip: one
// conditional UPDATE … WHERE quantity >= o.Quantity, restricted to round
// when round is not 0 (ErrRoundChanged when the product has moved on), and
// the ledger row, committed together (see sell).
func (s *Store) SellGuarded(ctx context.Context, o inventory.Order, strategy, instance string, round int) (inventory.Sale, error) {
	return s.sell(ctx, o, strategy, instance, round, lock.Fence{})
}

// SellFenced is a lock holder's sale of o. It locks the stock row, checks
// that o.Quantity are left (ErrSoldOut), claims the row with the holder's
// fence (refused as ErrLockBreach when a holder with the same or a newer
// token of the same counter claimed it: only a broken lock allows that),
// and decrements guarded; a guard refusal under the row lock means that
// the lock broke: ErrLockBreach.
//
// Without work (production: INVENTORY_WORK_DELAY is 0) that is one
// statement, one round trip (see sell). With work (a demo's simulated
// business work, inventory.Sleep under the lock), the sale is a
// transaction of several statements that does the work between the claim
// and the decrement, with the row locked: so a holder paused mid-work is
// seen holding the row (the fault tests time their faults by it,
// testenv.SalesAtWork), and the next holder's claim waits for it, then
// sees its sale.
//
// The fence comparison is strict because each hold claims once: after
// Redis loses its data mid-sale, the next token is minted above the
// highest committed fence and can equal the in-flight holder's; "<" lets
// only one of them on.
func (s *Store) SellFenced(ctx context.Context, o inventory.Order, strategy, instance string,
	fence lock.Fence, work time.Duration) (inventory.Sale, error) {
	if fence.Backend == "" {
		return inventory.Sale{}, fmt.Errorf("claim %q with fencing token %d: the token names no counter (lock.Fence.Backend)", o.ProductID, fence.Token)
	}
	if work <= 0 {
		return s.sell(ctx, o, strategy, instance, 0, fence)
	}
	return s.Record(ctx, o, strategy, instance, func(ctx context.Context, t *SaleTx) (Decrement, error) {
		left, _, err := t.ClaimFence(ctx, fence)
		if err != nil {
			return Decrement{}, err
		}
		if left < o.Quantity {
			return Decrement{}, fmt.Errorf("%d of %q wanted, %d left: %w", o.Quantity, o.ProductID, left, inventory.ErrSoldOut)
		}
		if err := inventory.Sleep(ctx, work); err != nil {
			return Decrement{}, fmt.Errorf("work under the lock: %w", err)
		}
		d, err := t.DecrementIfEnough(ctx, o.Quantity)
		if errors.Is(err, inventory.ErrSoldOut) {
			err = fmt.Errorf("%w: the stock changed under the lock after its check: %w", inventory.ErrLockBreach, err)
		}
		d.Fence = fence.Token
		return d, err
	})
}

// guardRefused is the SQLSTATE the sell procedure raises when its guarded
// decrement is refused under the row lock it took: only a broken lock
// explains that.
const guardRefused = "IG001"

// sold is the sell procedure's answer.
type sold struct {
	outcome   string
	id        *int64
	at        *time.Time
	remaining *int64
	round     *int32
	order     *string
	expiresAt *time.Time
	newest    *int64 // the fence that refused, for fence_refused
}

// sell runs the sell procedure for o: fenced with fence when its Backend
// is set, else the guarded write (in round, when not 0). A buyer's
// cancelled context, or a lock lost, stops the sale only before the
// statement is sent: once sent, it is decided by Postgres, and its answer
// awaited detached from ctx (bounded by the lock and commit timeouts), so
// that an outcome is never made unknown by a buyer hanging up.
//
// When another sale committed o.IdempotencyKey meanwhile, nothing was
// written and sell returns that sale as a replay (or
// ErrIdempotencyConflict). When the statement was sent but its answer never
// came, sell finds the outcome in the ledger by the sale's key (see
// resolve); only when it cannot does it return an error wrapping
// ErrOutcomeUnknown. Every other error means nothing was committed.
func (s *Store) sell(ctx context.Context, o inventory.Order, strategy, instance string, round int, fence lock.Fence) (sale inventory.Sale, err error) {
	ctx, span := tracing.Span(ctx, "postgres.transaction")
	defer func() { tracing.End(span, err) }()
	if ctx.Err() != nil {
		return inventory.Sale{}, fmt.Errorf("before the sale's statement: %w", inventory.Interrupted(ctx))
	}
	var key, backend *string
	if o.IdempotencyKey != "" {
		key = &o.IdempotencyKey
	}
	if fence.Backend != "" {
		backend = &fence.Backend
	}
	saleKey := uuid.NewString()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.limits.LockTimeout+s.limits.CommitTimeout)
	defer cancel()
	var r sold
	// The statement is the sale's commit, so its span is the commit's: a
	// lost reply shows as its error.
	_, commitSpan := tracing.Span(ctx, "postgres.commit")
	err = s.pool.QueryRow(sctx, sellSQL, o.ProductID, o.Quantity, round, key, saleKey, o.PayWithin.Milliseconds(),
		strategy, instance, backend, fence.Token, max(s.limits.LockTimeout.Milliseconds(), 1)).
		Scan(&r.outcome, &r.id, &r.at, &r.remaining, &r.round, &r.order, &r.expiresAt, &r.newest)
	tracing.End(commitSpan, err)
	if err != nil {
		return s.unsold(ctx, o, strategy, instance, fence, saleKey, err)
	}
	switch r.outcome {
	case "sold":
		sale = inventory.Sale{ID: *r.id, ProductID: o.ProductID, Quantity: o.Quantity, Remaining: *r.remaining,
			Round: int(*r.round), Strategy: strategy, Instance: instance, Fence: fence.Token, CreatedAt: *r.at}
		if r.order != nil && *r.order != "" {
			sale.OrderID, sale.OrderState, sale.ExpiresAt = *r.order, inventory.Held, *r.expiresAt
		}
		return sale, nil
	case "sold_out":
		return inventory.Sale{}, fmt.Errorf("%d of %q wanted, %d left: %w", o.Quantity, o.ProductID, deref(r.remaining), inventory.ErrSoldOut)
	case "round_changed":
		return inventory.Sale{}, fmt.Errorf("%q is in round %d, not %d: %w", o.ProductID, deref(r.round), round, ErrRoundChanged)
	case "not_found":
		return inventory.Sale{}, fmt.Errorf("product %q: %w", o.ProductID, inventory.ErrNotFound)
	case "fence_refused":
		return inventory.Sale{}, fmt.Errorf("%w: %w: fencing token %d is not newer than %d, the last claim on %q",
			inventory.ErrLockBreach, inventory.ErrLockLost, fence.Token, deref(r.newest), o.ProductID)
	}
	return inventory.Sale{}, fmt.Errorf("sell %q: the sell procedure answered %q", o.ProductID, r.outcome)
}

// unsold answers a sell statement that failed with err (saleKey: the
// sale's own key). Postgres's own error means nothing was committed (an
// Idempotency-Key taken meanwhile is answered by the sale that took it);
// an error that pgx knows came before anything was sent likewise; any
// other (the connection broke or timed out while the answer was awaited)
// leaves the outcome to the ledger (resolve).
func (s *Store) unsold(ctx context.Context, o inventory.Order, strategy, instance string, fence lock.Fence, saleKey string,
	err error) (inventory.Sale, error) {
	var pgErr *pgconn.PgError
	switch {
	case isUniqueViolation(err, "sales_idempotency_key_key"):
		// Postgres raised it only once that sale had committed, so it can
		// be read.
		winner, found, rerr := s.Replay(ctx, o)
		if rerr == nil && !found {
			rerr = fmt.Errorf("idempotency key %q: taken but its sale cannot be read", o.IdempotencyKey)
		}
		return winner, rerr
	case errors.As(err, &pgErr) && pgErr.Code == guardRefused:
		// The guard refused under the row lock the statement had taken:
		// only a broken lock explains it.
		return inventory.Sale{}, fmt.Errorf("%w: %w: %s", inventory.ErrLockBreach, inventory.ErrSoldOut, pgErr.Message)
	case errors.As(err, &pgErr), pgconn.SafeToRetry(err):
		return inventory.Sale{}, dbErr("sell", err)
	}
	sale, rerr := s.resolve(ctx, inventory.Sale{ProductID: o.ProductID}, saleKey,
		fmt.Errorf("%w: %w: reply lost: %w", inventory.ErrUnavailable, inventory.ErrOutcomeUnknown, err))
	if rerr != nil {
		return inventory.Sale{}, rerr
	}
	sale.Quantity, sale.Strategy, sale.Instance, sale.Fence = o.Quantity, strategy, instance, fence.Token
	return sale, nil
}

// deref is *p, or 0 for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
