package inventory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Seller sells units of one product by one strategy.
type Seller interface {
	// Sell takes o.Quantity units of o.ProductID, writing the decrement and
	// one ledger row in one Postgres transaction. It returns ErrSoldOut when
	// too few units remain, ErrNotFound for an unknown product, ErrLockTimeout
	// or ErrContention when it could not get its turn within the wait budget,
	// and ErrIdempotencyConflict when o.IdempotencyKey was used for another order.
	Sell(ctx context.Context, o Order) (Sale, error)
}

// Order is one buyer's request.
type Order struct {
	ProductID string
	Quantity  int64
	// IdempotencyKey, when not empty, makes a retry of the same order return
	// the original sale instead of selling again.
	IdempotencyKey string
	// PayWithin, when above 0, makes the sale a hold: the units leave the
	// stock now, and the order (Sale.OrderID) must be paid within it, or it
	// expires and they come back. MinPayWithin to MaxPayWithin.
	PayWithin time.Duration
}

// Validate refuses a bad order before it reaches Postgres or Redis: a bad
// product id (ErrBadProductID), a quantity outside 1 to MaxInt32
// (ErrBadQuantity), or a payment deadline out of bounds (ErrBadPayWithin).
func (o Order) Validate() error {
	if err := ValidateProductID(o.ProductID); err != nil {
		return err
	}
	if o.Quantity < 1 || o.Quantity > math.MaxInt32 {
		return fmt.Errorf("%w: %d, want 1 to %d", ErrBadQuantity, o.Quantity, math.MaxInt32)
	}
	if o.PayWithin != 0 && (o.PayWithin < MinPayWithin || o.PayWithin > MaxPayWithin) {
		return fmt.Errorf("%w: %v, want %v to %v", ErrBadPayWithin, o.PayWithin, MinPayWithin, MaxPayWithin)
	}
	return nil
}

// Sale is a completed sale, as recorded in the ledger.
type Sale struct {
	ID        int64
	ProductID string
	Quantity  int64
	// Remaining is the stock left right after this sale.
	Remaining int64
	Round     int
	Strategy  string
	Instance  string
	// Fence is the fencing token the sale was written under, 0 if none.
	Fence     int64
	CreatedAt time.Time
	// Replayed is true when an idempotent retry returned an earlier sale.
	Replayed bool
	// OrderID, for a hold (Order.PayWithin), is the order its units are
	// held for; empty for a final sale. OrderState is the order's state
	// when this answer was read (a replay may find it paid), ExpiresAt its
	// payment deadline.
	OrderID    string
	OrderState OrderState
	ExpiresAt  time.Time
}

// Product is a product's stock for the current round.
type Product struct {
	ID       string
	Name     string
	Quantity int64
	Initial  int64
	// Sold is the units the current round's sales took from the stock and
	// kept: the ledger's quantities less those returned (Returned).
	Sold int64
	// Returned is the units of cancelled, expired and refunded orders given
	// back to the current round's stock.
	Returned int64
	// Sales is the number of ledger rows for the current round.
	Sales   int64
	Round   int
	Version int64
}

// Sentinel errors, matched with errors.Is; the API maps them to HTTP statuses.
var (
	ErrNotFound     = errors.New("product not found")
	ErrSoldOut      = errors.New("sold out")
	ErrBadProductID = errors.New("bad product id")
	ErrBadQuantity  = errors.New("bad quantity")
	ErrLockTimeout  = errors.New("timed out waiting for the lock")
	ErrLockLost     = errors.New("lock lost before the sale committed")
	ErrContention   = errors.New("too much contention, try again")
	// ErrOverloaded: too many buyers of the product are already waiting in
	// this replica (Admission); nothing was tried.
	ErrOverloaded          = errors.New("too many buyers waiting for this product")
	ErrIdempotencyConflict = errors.New("idempotency key already used for a different order")
	ErrUnknownStrategy     = errors.New("unknown strategy")
	// ErrNotConfigured: the strategy needs a lock service (Info.Needs) this
	// process was not given; it cannot sell until restarted with it.
	ErrNotConfigured = errors.New("strategy not configured")
	ErrUnavailable   = errors.New("backend unavailable")
	// ErrLockBreach: Postgres refused a lock holder's write that its lock
	// should have made impossible (a stale fencing token, or the guard
	// finding too little stock inside the critical section): the lock broke
	// and the database caught it. It always comes with ErrLockLost or
	// ErrSoldOut, which decide the buyer's answer.
	ErrLockBreach = errors.New("lock breach caught by the database")
	// ErrOutcomeUnknown: COMMIT was sent but its answer never came, and the
	// ledger could not be read to find out whether the sale committed. It
	// always comes with ErrUnavailable. The buyer should retry with the same
	// Idempotency-Key.
	ErrOutcomeUnknown = errors.New("sale outcome unknown")
)

// maxProductID is the longest product id.
const maxProductID = 64

// ValidateProductID refuses ids that are not 1–64 letters, digits, '-', '_' or '.',
// before they reach SQL or Redis. (A loop, not a regexp: every sale, the
// crowd after a sell-out too, passes here.)
func ValidateProductID(id string) error {
	if !validProductID(id) {
		return fmt.Errorf("%w: %q must be 1-64 characters of letters, digits, '-', '_' and '.'", ErrBadProductID, id)
	}
	return nil
}

func validProductID(id string) bool {
	if len(id) == 0 || len(id) > maxProductID {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// Round is one round of a product's stock, as the ledger has it.
type Round struct {
	ProductID string
	Round     int
	// Initial is the stock the round started with.
	Initial int64
	// Sold is the units the round's sales took and kept (its ledger's
	// quantities less Returned), Sales its ledger rows.
	Sold, Sales int64
	// Returned is the units given back to the round's stock.
	Returned int64
	// Current is whether this is the product's current round.
	Current bool
}

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
