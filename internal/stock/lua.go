package stock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// lua reserves units with a Lua check-and-DECRBY on a Redis counter, then
// records the sale in Postgres: safe while Redis keeps the counter, NOT safe
// when Redis loses it while sales are in flight (the reload from Postgres
// counts units already reserved but not yet committed).
type lua struct {
	d Deps
}

var (
	//go:embed reserve.lua
	reserveSrc    string
	reserveScript = redis.NewScript(reserveSrc)
	//go:embed giveback.lua
	giveBackSrc    string
	giveBackScript = redis.NewScript(giveBackSrc)
)

// reservationTTL is how long Redis remembers a reservation, so that a
// re-sent reserve or give-back script acts at most once. It only needs to
// outlive one sale; an expired reservation can at worst strand its units
// (undersell), never sell them twice.
const reservationTTL = 5 * time.Minute

// giveBackTimeout bounds returning units after a failed sale, which runs
// even when the buyer's context has ended.
const giveBackTimeout = 5 * time.Second

func newLua(d Deps) *lua { return &lua{d: d} }

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *lua) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// errTwinInFlight: another order with the same idempotency key holds a
// reservation whose sale has not finished.
var errTwinInFlight = errors.New("an order with the same idempotency key is in flight")

// sell sells o by sellOnce. The Redis counter answers before Postgres
// commits, so an order racing its twin (a retry with the same idempotency
// key) could be told "sold out" with the twin's own units; instead it waits,
// within the Deps.Lock.Wait budget, for the twin's outcome: the twin's sale
// (a replay), or its give-back, after which it tries again.
func (s *lua) sell(ctx context.Context, o Order) (Sale, error) {
	res := uuid.NewString()
	deadline := time.Now().Add(budget(s.d))
	for attempt := 0; ; attempt++ {
		sale, err := s.sellOnce(ctx, o, res)
		if !errors.Is(err, errTwinInFlight) {
			return sale, err
		}
		if twin, found, err := s.d.Store.replay(ctx, o); err != nil || found {
			return twin, err
		}
		if time.Now().After(deadline) {
			return Sale{}, fmt.Errorf("%w: %w (key %q)", ErrContention, err, o.IdempotencyKey)
		}
		if err := pause(ctx, backoff(attempt, time.Millisecond, 16*time.Millisecond)); err != nil {
			return Sale{}, err
		}
	}
}

// sellOnce reserves the units in Redis under reservation res (loading a
// missing counter from Postgres), does the simulated work, then decrements
// Postgres and records the sale in one transaction. When that transaction
// certainly did not commit, the units go back to the counter; when its
// outcome is unknown they stay taken (undersell, never oversell).
func (s *lua) sellOnce(ctx context.Context, o Order, res string) (Sale, error) {
	if err := s.reserve(ctx, o, res); err != nil {
		if errors.Is(err, ErrUnavailable) {
			// The script may have run with its reply lost: give back
			// whatever it took (nothing, if it did not run).
			_ = s.giveBack(ctx, o, res)
		}
		return Sale{}, err
	}
	if err := pause(ctx, s.d.WorkDelay); err != nil {
		_ = s.giveBack(ctx, o, res)
		return Sale{}, err
	}
	// The Postgres decrement is unguarded on purpose: the counter decided.
	sale, err := s.d.Store.record(ctx, o, Lua, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return t.decrementBy(ctx, o.Quantity)
	})
	if notCommitted(sale, err) {
		if gerr := s.giveBack(ctx, o, res); gerr != nil && err != nil {
			err = fmt.Errorf("%w (and returning the %d reserved units failed: %v)", err, o.Quantity, gerr)
		}
	}
	return sale, err
}

// reserve takes o's units from the product's Redis counter under
// reservation res, loading the counter from Postgres when it is missing.
func (s *lua) reserve(ctx context.Context, o Order, res string) error {
	id, n := o.ProductID, o.Quantity
	// Twice is enough unless the counter is deleted again right after each
	// load (restocks in a tight loop); then give up rather than spin.
	for range 3 {
		status, left, err := runReserve(ctx, s.d.Redis, o, res)
		if err != nil {
			return err
		}
		switch status {
		case reserved:
			return nil
		case tooFew:
			return fmt.Errorf("%d of %q wanted, %d left in the Redis counter: %w", n, id, left, ErrSoldOut)
		case returned:
			return fmt.Errorf("reservation %s of %q was already given back: %w", res, id, ErrUnavailable)
		case twinInFlight:
			return errTwinInFlight
		}
		if err := s.seed(ctx, id); err != nil {
			return err
		}
	}
	return fmt.Errorf("redis counter %s keeps disappearing: %w", counterKey(id), ErrUnavailable)
}

// seed loads a missing counter from Postgres. SET NX keeps a counter that
// another sale loaded meanwhile; an unknown product creates no key.
func (s *lua) seed(ctx context.Context, id string) error {
	q, err := s.d.Store.quantity(ctx, id)
	if err != nil {
		return err
	}
	if err := s.d.Redis.SetNX(ctx, counterKey(id), q, 0).Err(); err != nil {
		return redisErr("load counter "+counterKey(id), err)
	}
	return nil
}

// giveBack returns a reservation's units, even after ctx has ended.
func (s *lua) giveBack(ctx context.Context, o Order, res string) error {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	err := giveBackScript.Run(gctx, s.d.Redis, scriptKeys(o, res), o.Quantity, reservationTTL.Milliseconds(), res).Err()
	if err != nil {
		return redisErr("give back reservation "+res, err)
	}
	return nil
}

// Outcomes of reserve.lua.
const (
	reserved     = 1
	tooFew       = 0
	missing      = -1
	returned     = -2
	twinInFlight = -3
)

// runReserve runs reserve.lua once for o and returns its status and the units left.
func runReserve(ctx context.Context, rdb redis.UniversalClient, o Order, res string) (status, left int64, err error) {
	id := o.ProductID
	out, err := reserveScript.Run(ctx, rdb, scriptKeys(o, res), o.Quantity, reservationTTL.Milliseconds(), res).Int64Slice()
	if err != nil {
		return 0, 0, redisErr("reserve from "+counterKey(id), err)
	}
	if len(out) != 2 {
		return 0, 0, fmt.Errorf("redis: reserve from %s: got %v, want {status, left}", counterKey(id), out)
	}
	return out[0], out[1], nil
}

// scriptKeys are the keys reserve.lua and giveback.lua touch for o's
// reservation res: the counter, the reservation and, for an order with an
// idempotency key, that key's in-flight marker. The hash tag keeps them all
// in the counter's Redis Cluster slot, as scripts require.
func scriptKeys(o Order, res string) []string {
	keys := []string{counterKey(o.ProductID), reservationKey(o.ProductID, res)}
	if o.IdempotencyKey != "" {
		keys = append(keys, counterKey(o.ProductID)+":idem:"+o.IdempotencyKey)
	}
	return keys
}

// reservationKey is where a sale's reservation is remembered.
func reservationKey(id, res string) string { return counterKey(id) + ":res:" + res }

var _ Seller = (*lua)(nil)
