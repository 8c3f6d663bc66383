package stock

import (
	"context"
	"errors"
	"fmt"
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
}

// Product is a product's stock for the current round.
type Product struct {
	ID       string
	Name     string
	Quantity int64
	Initial  int64
	// Sold is the sum of the ledger's quantities for the current round.
	Sold int64
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

// Redis keys for a product; the hash tag keeps every key of one product in
// one Redis Cluster slot.
func lockKey(productID string) string    { return "lock:{" + productID + "}" }
func counterKey(productID string) string { return "stock:{" + productID + "}" }
