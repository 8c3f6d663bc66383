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

// sell reserves the units in Redis (loading a missing counter from
// Postgres), does the simulated work, then decrements Postgres and records
// the sale in one transaction. When that transaction certainly did not
// commit, the units go back to the counter; when its outcome is unknown they
// stay taken (undersell, never oversell).
func (s *lua) sell(ctx context.Context, o Order) (Sale, error) {
	res := uuid.NewString()
	if err := s.reserve(ctx, o.ProductID, o.Quantity, res); err != nil {
		if errors.Is(err, ErrUnavailable) {
			// The script may have run with its reply lost: give back
			// whatever it took (nothing, if it did not run).
			_ = s.giveBack(ctx, o.ProductID, o.Quantity, res)
		}
		return Sale{}, err
	}
	if err := pause(ctx, s.d.WorkDelay); err != nil {
		_ = s.giveBack(ctx, o.ProductID, o.Quantity, res)
		return Sale{}, err
	}
	// The Postgres decrement is unguarded on purpose: the counter decided.
	sale, err := s.d.Store.record(ctx, o, Lua, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return t.decrementBy(ctx, o.Quantity)
	})
	if notCommitted(sale, err) {
		if gerr := s.giveBack(ctx, o.ProductID, o.Quantity, res); gerr != nil && err != nil {
			err = fmt.Errorf("%w (and returning the %d reserved units failed: %v)", err, o.Quantity, gerr)
		}
	}
	return sale, err
}

// reserve takes n units of id from its Redis counter under reservation res,
// loading the counter from Postgres when it is missing.
func (s *lua) reserve(ctx context.Context, id string, n int64, res string) error {
	// Twice is enough unless the counter is deleted again right after each
	// load (restocks in a tight loop); then give up rather than spin.
	for range 3 {
		status, left, err := runReserve(ctx, s.d.Redis, id, n, res)
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
func (s *lua) giveBack(ctx context.Context, id string, n int64, res string) error {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	err := giveBackScript.Run(gctx, s.d.Redis, []string{counterKey(id), reservationKey(id, res)}, n, reservationTTL.Milliseconds()).Err()
	if err != nil {
		return redisErr("give back reservation "+res, err)
	}
	return nil
}

// Outcomes of reserve.lua.
const (
	reserved = 1
	tooFew   = 0
	missing  = -1
	returned = -2
)

// runReserve runs reserve.lua once and returns its status and the units left.
func runReserve(ctx context.Context, rdb redis.UniversalClient, id string, n int64, res string) (status, left int64, err error) {
	out, err := reserveScript.Run(ctx, rdb, []string{counterKey(id), reservationKey(id, res)}, n, reservationTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, 0, redisErr("reserve from "+counterKey(id), err)
	}
	if len(out) != 2 {
		return 0, 0, fmt.Errorf("redis: reserve from %s: got %v, want {status, left}", counterKey(id), out)
	}
	return out[0], out[1], nil
}

// reservationKey is where a sale's reservation is remembered; the hash tag
// keeps it in its counter's Redis Cluster slot, as scripts require.
func reservationKey(id, res string) string { return counterKey(id) + ":res:" + res }

var _ Seller = (*lua)(nil)
