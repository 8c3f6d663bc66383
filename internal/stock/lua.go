package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/redis"
	"inventory/internal/tracing"
)

// lua reserves units with a Lua check-and-decrement on a Redis counter, then
// records the sale in Postgres with a guarded write in the counter's round:
// safe, Postgres has the last word. The counter knows its round, so units
// can never be given back to, reserved from, or reloaded into the wrong
// round; when it over-counts (other strategies sold meanwhile, or it was
// reloaded while sales were in flight) Postgres refuses the sale with a
// 409 and the counter is dropped to be reloaded; when it counts too few (an
// older round's or an old read's), Postgres is asked before any "sold out"
// is answered, and the counter is reloaded.
type lua struct {
	d       Deps
	counter redis.Counter
	// lease is reservationLease; tests shorten it.
	lease time.Duration
}

// reservationLease is how long a reservation's units stay taken once its
// holder stops renewing them (it died, or its sale's outcome is unknown):
// the next reserve of the product after that gives them back. The holder
// renews every third of it while its sale runs. A holder that outlives its
// lease (paused) and then commits leaves the counter counting units
// Postgres has sold: Postgres's guard refuses that sale's successors, and
// the counter is reloaded (see sellOnce), so it can cost a retry, never an
// oversell.
const reservationLease = 2 * time.Second

// giveBackTimeout bounds returning units after a failed sale, which runs
// even when the buyer's context has ended.
const giveBackTimeout = 5 * time.Second

func newLua(d Deps) *lua {
	return &lua{d: d, counter: redis.NewCounter(d.Redis), lease: reservationLease}
}

// errTwinInFlight: another order with the same idempotency key holds a
// reservation whose sale has not finished.
var errTwinInFlight = errors.New("an order with the same idempotency key is in flight")

// errUnitsInFlight: too few units are left in the counter, but live
// reservations hold enough that, given back, the order could be sold: "sold
// out" is not yet true.
var errUnitsInFlight = errors.New("the units this order needs are reserved by sales in flight")

// Sell sells o by sellOnce, trying again, within the Deps.Wait budget,
// in three cases. The Redis counter answers before Postgres commits, so an
// order racing its twin (a retry with the same idempotency key) could be
// told "sold out" with the twin's own units; instead it waits for the twin's
// outcome: the twin's sale (a replay), its give-back, or its lease running
// out (its holder died, or its outcome is unknown). Likewise an order that
// finds too few units in the counter while live reservations hold enough
// waits for those sales, so that "sold out" is said only once it is true
// (were they to fail and give their units back, it would not have been).
// And a restock between the reservation and the write leaves the
// reservation in a round that is over: the sale is tried again in the new
// one.
func (s *lua) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	deadline := time.Now().Add(budget(s.d))
	tries := 0
	defer func() { tracing.Attempts(ctx, tries) }()
	for attempt := 0; ; attempt++ {
		tries = attempt + 1
		sale, err := s.sellOnce(ctx, o, uuid.NewString())
		switch {
		case errors.Is(err, errTwinInFlight):
			if twin, found, err := s.d.Store.Replay(ctx, o); err != nil || found {
				return twin, err
			}
		case errors.Is(err, errUnitsInFlight):
			// Wait for those sales: they commit (then sold out is true) or
			// give their units back (then this order may have them).
		case errors.Is(err, postgres.ErrRoundChanged):
			if attempt >= 3 {
				return inventory.Sale{}, fmt.Errorf("%w: %q was restocked during each of %d tries: %w", inventory.ErrContention, o.ProductID, attempt+1, err)
			}
		default:
			return sale, err
		}
		if time.Now().After(deadline) {
			return inventory.Sale{}, fmt.Errorf("%w: %w (key %q)", inventory.ErrContention, err, o.IdempotencyKey)
		}
		if err := inventory.Sleep(ctx, backoff(attempt, time.Millisecond, 16*time.Millisecond)); err != nil {
			return inventory.Sale{}, err
		}
	}
}

// sellOnce reserves the units in Redis under reservation id res (loading a
// missing counter from Postgres), does the simulated work, then decrements
// Postgres, guarded and in the reservation's round, and records the sale in
// one transaction. The reservation's lease is renewed meanwhile. When that
// transaction certainly did not commit, the units go back to the counter
// they came from; when it committed, the lease ends; when its outcome is
// unknown, the lease runs out and the next reserve gives the units back
// (if the sale did commit, the counter then over-counts, which Postgres's
// guard catches: never an oversell). When Postgres refuses for lack of
// stock, the counter over-counted: it is dropped, to be reloaded.
func (s *lua) sellOnce(ctx context.Context, o inventory.Order, res string) (inventory.Sale, error) {
	r, err := s.reserve(ctx, o, res)
	if err != nil {
		if errors.Is(err, inventory.ErrUnavailable) {
			// The script may have run with its reply lost: give back
			// whatever it took (nothing, if it did not run).
			_ = s.giveBack(ctx, o, res)
		}
		return inventory.Sale{}, err
	}
	stop := s.renew(ctx, o, r)
	if err := inventory.Sleep(ctx, s.d.WorkDelay); err != nil {
		stop()
		_ = s.giveBack(ctx, o, res)
		return inventory.Sale{}, err
	}
	sale, err := s.d.Store.SellGuarded(ctx, o, inventory.Lua, s.d.Instance, int(r.Round))
	stop()
	switch {
	case notCommitted(sale, err):
		if gerr := s.giveBack(ctx, o, res); gerr != nil && err != nil {
			err = fmt.Errorf("%w (and returning the %d reserved units failed: %v)", err, o.Quantity, gerr)
		}
	case err == nil:
		s.settle(ctx, o, r)
		// An unknown outcome keeps its lease to run out: the units come
		// back then, and if the sale did commit after all, Postgres's guard
		// catches the counter's surplus.
	}
	switch {
	case errors.Is(err, inventory.ErrSoldOut):
		s.drop(ctx, o.ProductID, r)
	case errors.Is(err, postgres.ErrRoundChanged):
		// Load the new round's counter, in case the restock could not
		// delete the old one.
		if serr := s.seed(ctx, o.ProductID); serr != nil {
			return inventory.Sale{}, serr
		}
	}
	return sale, err
}

// reserve takes o's units from the product's Redis counter under
// reservation res, loading the counter from Postgres when it is missing.
func (s *lua) reserve(ctx context.Context, o inventory.Order, res string) (redis.Reservation, error) {
	id, n := o.ProductID, o.Quantity
	// Twice is enough unless the counter is deleted again right after each
	// load (restocks in a tight loop); then give up rather than spin.
	for range 3 {
		status, r, err := s.counter.Reserve(ctx, o, res, s.lease)
		if err != nil {
			return r, err
		}
		switch status {
		case redis.Reserved:
			return r, nil
		case redis.TooFew:
			if r.UnitsLeftNow+r.Pending >= n {
				return r, fmt.Errorf("%d of %q wanted, %d left in the Redis counter, %d reserved in flight: %w", n, id, r.UnitsLeftNow, r.Pending, errUnitsInFlight)
			}
			stale, err := s.staleCounter(ctx, o, r)
			if err != nil {
				return r, err
			}
			if !stale {
				return r, fmt.Errorf("%d of %q wanted, %d left in the Redis counter and %d in flight: %w", n, id, r.UnitsLeftNow, r.Pending, inventory.ErrSoldOut)
			}
			s.drop(ctx, id, r)
		case redis.Returned:
			return r, fmt.Errorf("reservation %s of %q was already given back: %w", res, id, inventory.ErrUnavailable)
		case redis.TwinInFlight:
			return r, errTwinInFlight
		}
		if err := s.seed(ctx, id); err != nil {
			return r, err
		}
	}
	return redis.Reservation{}, fmt.Errorf("redis counter %s keeps disappearing: %w", redis.CounterKey(id), inventory.ErrUnavailable)
}

// staleCounter asks Postgres, which has the last word, whether the counter
// that r found too low for o is stale: Postgres's current round is another
// one, or has the units after all. A counter only ever counts more than
// Postgres has (reservations in flight aside, which the caller counted), so
// a lower one was loaded from an older round or an old read (a seed that
// read Postgres before a restock and ran after it, a restock whose DEL
// failed, a Redis failover or restore bringing back an older counter):
// answering "sold out" from it would be untrue for as long as it lives.
// When it is not stale, Postgres too has fewer than o's units now, so the
// sold-out answer is true at this read.
func (s *lua) staleCounter(ctx context.Context, o inventory.Order, r redis.Reservation) (bool, error) {
	q, round, err := s.d.Store.Quantity(ctx, o.ProductID)
	if err != nil {
		return false, err
	}
	return int64(round) != r.Round || q >= o.Quantity, nil
}

// seed loads a missing counter, or one of an earlier round, from Postgres;
// a counter another sale loaded meanwhile is kept. An unknown product
// creates no key.
func (s *lua) seed(ctx context.Context, id string) error {
	q, round, err := s.d.Store.Quantity(ctx, id)
	if err != nil {
		return err
	}
	return s.counter.Seed(ctx, id, q, round)
}

// drop deletes the counter r was taken from, if it is still that round and
// load, so that the next sale reloads it from Postgres. Best effort: a
// counter that stays over-counts, and Postgres keeps refusing what it has not.
func (s *lua) drop(ctx context.Context, id string, r redis.Reservation) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	_ = s.counter.Drop(dctx, id, r)
}

// renew keeps reservation r's lease alive, renewing it every third of the
// lease, until the returned stop is called; stop waits for it to end. A
// renewal that fails leaves the lease to run out: the units go back then.
func (s *lua) renew(ctx context.Context, o inventory.Order, r redis.Reservation) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-time.After(s.lease / 3):
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease/3)
			_ = s.counter.Renew(rctx, o, r, s.lease)
			cancel()
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// settle ends a committed sale's lease: its units are Postgres's now.
// Best effort: a lease left behind runs out and gives the units back to the
// counter, whose surplus Postgres's guard then catches.
func (s *lua) settle(ctx context.Context, o inventory.Order, r redis.Reservation) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	_ = s.counter.Settle(sctx, o, r)
}

// giveBack returns a reservation's units, even after ctx has ended.
func (s *lua) giveBack(ctx context.Context, o inventory.Order, res string) error {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	return s.counter.GiveBack(gctx, o, res)
}

var _ inventory.Seller = (*lua)(nil)
