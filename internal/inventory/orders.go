package inventory

import (
	"errors"
	"fmt"
	"time"
)

// An order's life after its sale. A sale asked with a payment deadline
// (Order.PayWithin) is a hold: its units leave the stock as any sale's do,
// and the order is held until it is paid, cancelled or expires. Cancelled,
// expired and refunded orders give their units back to the stock, once.

// OrderState is where an order is in its life.
type OrderState string

// The states of an order. Held is the only one a sale creates; the others
// are reached by an Action.
const (
	Held      OrderState = "held"
	Paid      OrderState = "paid"
	Shipped   OrderState = "shipped"
	Cancelled OrderState = "cancelled"
	Expired   OrderState = "expired"
	Refunded  OrderState = "refunded"
)

// Action is a step of an order's life: asked by a buyer (pay, cancel,
// refund), by the shop (ship), or taken by the expiry job (expire).
type Action string

// The actions, each allowed from one state (From) and leading to one (To).
const (
	Pay    Action = "pay"
	Cancel Action = "cancel"
	Refund Action = "refund"
	Ship   Action = "ship"
	Expire Action = "expire"
)

// transitions is the one table of an order's life.
var transitions = map[Action]struct {
	from, to OrderState
}{
	Pay:    {Held, Paid},
	Cancel: {Held, Cancelled},
	Expire: {Held, Expired},
	Refund: {Paid, Refunded},
	Ship:   {Paid, Shipped},
}

// ParseAction returns the action called name, or ErrBadAction.
func ParseAction(name string) (Action, error) {
	a := Action(name)
	if _, ok := transitions[a]; !ok {
		return "", fmt.Errorf("%w: %q, want pay, cancel, refund or ship", ErrBadAction, name)
	}
	return a, nil
}

// From is the state a allows an order to leave.
func (a Action) From() OrderState { return transitions[a].from }

// To is the state a leads to.
func (a Action) To() OrderState { return transitions[a].to }

// Returns reports whether a gives the order's units back to the stock.
func (a Action) Returns() bool {
	switch a.To() {
	case Cancelled, Expired, Refunded:
		return true
	}
	return false
}

// The bounds of Order.PayWithin.
const (
	MinPayWithin = time.Second
	MaxPayWithin = 24 * time.Hour
)

// OrderRecord is an order as Postgres has it: its state now and every
// state it entered.
type OrderRecord struct {
	ID        string
	SaleID    int64
	ProductID string
	Quantity  int64
	Round     int
	State     OrderState
	// ExpiresAt is the payment deadline, by Postgres's clock.
	ExpiresAt time.Time
	History   []OrderEvent
}

// Entered reports whether the order was ever in state st.
func (r OrderRecord) Entered(st OrderState) bool {
	for _, e := range r.History {
		if e.State == st {
			return true
		}
	}
	return false
}

// OrderEvent is one state an order entered, when, and by whom (an
// instance, or the expiry job).
type OrderEvent struct {
	State OrderState
	At    time.Time
	By    string
}

// ValidateOrderID refuses an order id that is not a UUID in its canonical
// text form, before it reaches SQL.
func ValidateOrderID(id string) error {
	if !validUUID(id) {
		return fmt.Errorf("%w: %q, want a UUID such as 3f2b5c1e-8d4a-4b6e-9c1f-2a7d5e8b9c0d", ErrBadOrderID, id)
	}
	return nil
}

func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// Order errors, matched with errors.Is; the API maps them to HTTP statuses.
var (
	ErrOrderNotFound = errors.New("order not found")
	ErrBadOrderID    = errors.New("bad order id")
	ErrBadAction     = errors.New("bad order action")
	ErrBadPayWithin  = errors.New("bad pay_within")
	// ErrOrderExpired: a payment came after the order's deadline, or after
	// the expiry job took the order; nothing changed.
	ErrOrderExpired = errors.New("order expired")
	// ErrOrderState: the order's state does not allow the action (a refund
	// after shipping, say); nothing changed.
	ErrOrderState = errors.New("order state does not allow this")
)
