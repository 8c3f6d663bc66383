package redis

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
)

var (
	//go:embed reserve.lua
	reserveSrc    string
	reserveScript = goredis.NewScript(reserveSrc)
	//go:embed giveback.lua
	giveBackSrc    string
	giveBackScript = goredis.NewScript(giveBackSrc)
	//go:embed seed.lua
	seedSrc    string
	seedScript = goredis.NewScript(seedSrc)
	//go:embed drop.lua
	dropSrc    string
	dropScript = goredis.NewScript(dropSrc)
	//go:embed renew.lua
	renewSrc    string
	renewScript = goredis.NewScript(renewSrc)
)

// ReservationTTL is how long Redis remembers a reservation, so that a
// re-sent reserve or give-back script acts at most once. It only needs to
// outlive one sale.
const ReservationTTL = 5 * time.Minute

// CounterTTL is how long a loaded counter lives before it is reloaded from
// Postgres. A stale counter turns nobody away (the lua strategy confirms a
// "too few" with Postgres); one that counts too many costs refused writes
// until it is dropped or runs out.
const CounterTTL = time.Minute

// Counter is the lua strategy's per-product, per-round counters of units
// in Redis, each with the reservations taken from it (reserve.lua).
type Counter struct{ rdb goredis.UniversalClient }

// NewCounter is the counters kept in rdb.
func NewCounter(rdb goredis.UniversalClient) Counter { return Counter{rdb: rdb} }

// Status is what a reservation attempt came to (reserve.lua's answer).
type Status int64

// Outcomes of reserve.lua.
const (
	// Reserved: the units are taken, under the reservation's lease.
	Reserved Status = 1
	// TooFew: the counter has fewer units than the order wants.
	TooFew Status = 0
	// Missing: no counter; seed one from Postgres and try again.
	Missing Status = -1
	// Returned: this reservation was already given back.
	Returned Status = -2
	// TwinInFlight: an order with the same Idempotency-Key holds a
	// reservation now.
	TwinInFlight Status = -3
)

// Reservation is what reserve.lua took: from which round and load
// (generation) of the counter.
type Reservation struct {
	ID           string
	Round, Gen   int64
	UnitsLeftNow int64
	// Pending, with TooFew, is the units live reservations hold.
	Pending int64
}

// Reserve runs reserve.lua once: it takes o's units from the product's
// counter under reservation res with a lease of lease, giving back first
// the units of reservations whose lease ran out.
func (c Counter) Reserve(ctx context.Context, o inventory.Order, res string, lease time.Duration) (Status, Reservation, error) {
	id := o.ProductID
	out, err := reserveScript.Run(ctx, c.rdb, scriptKeys(o, res), o.Quantity, ReservationTTL.Milliseconds(), res, lease.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, Reservation{}, unavailable("reserve from "+CounterKey(id), err)
	}
	if len(out) != 4 && len(out) != 5 {
		return 0, Reservation{}, fmt.Errorf("redis: reserve from %s: got %v, want {status, left, round, generation[, pending]}", CounterKey(id), out)
	}
	r := Reservation{ID: res, UnitsLeftNow: out[1], Round: out[2], Gen: out[3]}
	if len(out) == 5 {
		r.Pending = out[4]
	}
	return Status(out[0]), r, nil
}

// Seed loads product id's counter with quantity units of round, unless a
// counter of that round is there already (another sale loaded it).
func (c Counter) Seed(ctx context.Context, id string, quantity int64, round int) error {
	keys := []string{CounterKey(id), CounterKey(id) + ":gen"}
	if err := seedScript.Run(ctx, c.rdb, keys, quantity, round, CounterTTL.Milliseconds()).Err(); err != nil {
		return unavailable("load counter "+CounterKey(id), err)
	}
	return nil
}

// Drop deletes the counter r was taken from, if it is still that round and
// load, so that the next sale reloads it from Postgres.
func (c Counter) Drop(ctx context.Context, id string, r Reservation) error {
	if err := dropScript.Run(ctx, c.rdb, []string{CounterKey(id)}, r.Round, r.Gen).Err(); err != nil {
		return unavailable("drop counter "+CounterKey(id), err)
	}
	return nil
}

// Renew extends reservation r's lease to lease from now.
func (c Counter) Renew(ctx context.Context, o inventory.Order, r Reservation, lease time.Duration) error {
	if err := renewScript.Run(ctx, c.rdb, []string{LeasesKey(o.ProductID)}, leaseMember(o, r), lease.Milliseconds()).Err(); err != nil {
		return unavailable("renew reservation "+r.ID, err)
	}
	return nil
}

// Settle ends a committed sale's lease: its units are Postgres's now.
func (c Counter) Settle(ctx context.Context, o inventory.Order, r Reservation) error {
	if err := c.rdb.ZRem(ctx, LeasesKey(o.ProductID), leaseMember(o, r)).Err(); err != nil {
		return unavailable("settle reservation "+r.ID, err)
	}
	return nil
}

// GiveBack returns reservation res's units to the counter they came from
// (at most once; nothing when the reservation was never made).
func (c Counter) GiveBack(ctx context.Context, o inventory.Order, res string) error {
	err := giveBackScript.Run(ctx, c.rdb, scriptKeys(o, res), o.Quantity, ReservationTTL.Milliseconds(), res).Err()
	if err != nil {
		return unavailable("give back reservation "+res, err)
	}
	return nil
}

// Reset deletes product id's counter and its setnx lock key, after a
// restock: a holder of the old round has nothing left to protect, and a
// key left without a TTL must not outlive a restock.
func (c Counter) Reset(ctx context.Context, id string) error {
	if err := c.rdb.Del(ctx, CounterKey(id), SetNXKey(id)).Err(); err != nil {
		return unavailable(fmt.Sprintf("restocked %q but could not delete its Redis counter", id), err)
	}
	return nil
}

// leaseMember is r's entry in the product's leases (see reserve.lua).
func leaseMember(o inventory.Order, r Reservation) string {
	return fmt.Sprintf("%s %d %d %d", r.ID, r.Round, r.Gen, o.Quantity)
}

// scriptKeys are the keys reserve.lua and giveback.lua touch for o's
// reservation res: the counter, the reservation, the product's leases and,
// for an order with an idempotency key, that key's in-flight marker. The
// hash tag keeps them all in the counter's Redis Cluster slot, as scripts
// require.
func scriptKeys(o inventory.Order, res string) []string {
	keys := []string{CounterKey(o.ProductID), ReservationKey(o.ProductID, res), LeasesKey(o.ProductID)}
	if o.IdempotencyKey != "" {
		keys = append(keys, CounterKey(o.ProductID)+":idem:"+o.IdempotencyKey)
	}
	return keys
}

// unavailable translates a Redis client error: every failure to get an
// answer from Redis wraps inventory.ErrUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("redis: %s: %w: %w", op, inventory.ErrUnavailable, err)
}
