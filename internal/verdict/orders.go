package verdict

import (
	"fmt"
	"slices"
	"time"
)

// Order states, as Postgres keeps them (docs/orders.md).
const (
	StateHeld      = "held"
	StatePaid      = "paid"
	StateShipped   = "shipped"
	StateCancelled = "cancelled"
	StateExpired   = "expired"
	StateRefunded  = "refunded"
)

// Orders is what a run with holds left: every order of its products in the
// run's rounds, each round's units by where they are, and every answer a
// buyer got for a step, read from Postgres and the buyers' answers after
// the run had waited for its held orders to end.
type Orders struct {
	// PayWithin is the holds' pay_within, and SweepBound how late after
	// its deadline the expiry job may expire a held order (docs/orders.md:
	// INVENTORY_ORDER_SWEEP_INTERVAL + lock TTL + 1 s).
	PayWithin  time.Duration
	SweepBound time.Duration
	// Rounds is each product's rounds of the run.
	Rounds []OrderRound
	// Orders is every order of the run's products in its rounds.
	Orders []Order
	// Steps is every step answer a buyer got that says something: a 200,
	// a 409 order-expired or order-state (with the order's state), or
	// another 4xx (which no step of an existing order may get).
	Steps []StepAnswer
	// Unended is the orders still held when the run stopped waiting for
	// them (PayWithin + SweepBound after the last hold).
	Unended []string
}

// OrderRound is one round of one product, its units counted from Postgres.
type OrderRound struct {
	Product string
	Round   int64
	Current bool  // the product's current round: Stock is its stock
	Initial int64 // the round's stock when it started
	Stock   int64 // the stock row's quantity (current round only)
	// Outright is the units sold without an order; Held, Paid, Shipped the
	// units of the round's orders in each state.
	Outright, Held, Paid, Shipped int64
	// Returned is the units of the round's returns rows that went back to
	// its stock (restored), and Freed the units of its cancelled, expired
	// and refunded orders.
	Returned, Freed int64
}

// Order is one order as Postgres has it.
type Order struct {
	ID        string
	Product   string
	Round     int64
	Quantity  int64
	State     string
	ExpiresAt time.Time // Postgres's clock
	// Events is every state it entered, oldest first (order_events).
	Events []OrderEvent
	// Returns is its rows in returns (at most one: the primary key, checked
	// anyway), with the reason of the first.
	Returns      int
	ReturnReason string
	// ReturnTx names the transaction that wrote its return (the returns
	// row's xmin; "" for none): returns written by one transaction (a
	// sweep's expiries of a product) came back at one commit, together.
	ReturnTx string
}

// OrderEvent is one state an order entered, and when (Postgres's clock).
type OrderEvent struct {
	State string
	At    time.Time
}

// StepAnswer is one answer a buyer got for a step of an order.
type StepAnswer struct {
	Order string
	Step  string // pay, cancel, refund, ship
	// Status is the HTTP status; Problem the problem's type slug for a 4xx
	// (order-expired, order-state, order-not-found, …); State the order's
	// state the answer carried.
	Status  int
	Problem string
	State   string
}

// OrdersBroken: a safe strategy's run with orders broke an invariant of an
// order's life (docs/orders.md), read from Postgres after the run: a round
// holds more units than it began with, or a stock that is not its initial
// less the units sold, held, paid and shipped; an order's units returned
// twice, from a paid or shipped order, or not at all from a cancelled,
// expired or refunded one; a held order expired later than its deadline
// and the sweep's bound; or an answer a buyer got for a step that the
// order's history contradicts. The load tester exits 1.
const OrdersBroken = "ORDERS BROKEN"

// LateExpiry is how far past its deadline order o was expired (0 when it
// was not expired).
func (o Order) LateExpiry() time.Duration {
	for _, ev := range o.Events {
		if ev.State == StateExpired {
			return max(0, ev.At.Sub(o.ExpiresAt))
		}
	}
	return 0
}

// entered reports whether o ever entered state.
func (o Order) entered(state string) bool {
	return slices.ContainsFunc(o.Events, func(ev OrderEvent) bool { return ev.State == state })
}

// next is the states each state may go to.
var next = map[string][]string{
	StateHeld: {StatePaid, StateCancelled, StateExpired},
	StatePaid: {StateShipped, StateRefunded},
}

// returnsUnits reports whether an order in state gives its units back.
func returnsUnits(state string) bool {
	return state == StateCancelled || state == StateExpired || state == StateRefunded
}

// Check is every broken invariant of the orders, each named with the
// first order or round that breaks it (at most MaxProductReasons), and the
// orders still held that should have ended (stuck).
func (ords Orders) Check() (broken, stuck []string) {
	add := func(why string) {
		if len(broken) < MaxProductReasons {
			broken = append(broken, why)
		} else if len(broken) == MaxProductReasons {
			broken = append(broken, "… and more broken order invariants")
		}
	}
	for _, r := range ords.Rounds {
		live := r.Outright + r.Held + r.Paid + r.Shipped
		if live > r.Initial {
			add(fmt.Sprintf("%s round %d: %d units sold outright + %d held + %d paid + %d shipped = %d > initial %d",
				r.Product, r.Round, r.Outright, r.Held, r.Paid, r.Shipped, live, r.Initial))
		}
		if r.Current && r.Stock != r.Initial-live {
			add(fmt.Sprintf("%s round %d: stock %d, want initial %d − %d sold, held, paid or shipped = %d (%d units returned, %d freed by orders)",
				r.Product, r.Round, r.Stock, r.Initial, live, r.Initial-live, r.Returned, r.Freed))
		}
		if r.Returned != r.Freed && r.Current {
			add(fmt.Sprintf("%s round %d: %d units returned to the stock, but its cancelled, expired and refunded orders hold %d",
				r.Product, r.Round, r.Returned, r.Freed))
		}
	}
	byID := map[string]*Order{}
	for i := range ords.Orders {
		o := &ords.Orders[i]
		byID[o.ID] = o
		switch {
		case o.Returns > 1:
			add(fmt.Sprintf("order %s (%s): its units returned %d times", o.ID, o.State, o.Returns))
		case returnsUnits(o.State) && o.Returns == 0:
			add(fmt.Sprintf("order %s is %s but its units never returned", o.ID, o.State))
		case !returnsUnits(o.State) && o.Returns > 0:
			add(fmt.Sprintf("order %s is %s but its units returned (%s)", o.ID, o.State, o.ReturnReason))
		case o.Returns == 1 && o.ReturnReason != o.State:
			add(fmt.Sprintf("order %s is %s but its units returned as %s", o.ID, o.State, o.ReturnReason))
		}
		if why := o.pathBroken(); why != "" {
			add(why)
		}
		if late := o.LateExpiry(); ords.SweepBound > 0 && late > ords.SweepBound {
			add(fmt.Sprintf("order %s expired %s after its deadline, past the sweep's bound of %s", o.ID, late.Round(time.Millisecond), ords.SweepBound))
		}
	}
	for _, a := range ords.Steps {
		o, ok := byID[a.Order]
		if !ok {
			add(fmt.Sprintf("a %s of order %s was answered %d, but Postgres has no such order of the run", a.Step, a.Order, a.Status))
			continue
		}
		if why := a.contradicts(o); why != "" {
			add(why)
		}
	}
	for _, id := range ords.Unended {
		if len(stuck) == MaxProductReasons {
			stuck = append(stuck, fmt.Sprintf("… %d held orders in all", len(ords.Unended)))
			break
		}
		stuck = append(stuck, fmt.Sprintf("order %s still held when the run stopped waiting for it (pay_within %s + the sweep's bound %s)",
			id, ords.PayWithin, ords.SweepBound))
	}
	return broken, stuck
}

// pathBroken says what is wrong with o's history of states: it must start
// held, move only as next allows, and end in o's state.
func (o Order) pathBroken() string {
	if len(o.Events) == 0 {
		return fmt.Sprintf("order %s (%s) has no history", o.ID, o.State)
	}
	if o.Events[0].State != StateHeld {
		return fmt.Sprintf("order %s began %s, not held", o.ID, o.Events[0].State)
	}
	for i := 1; i < len(o.Events); i++ {
		from, to := o.Events[i-1].State, o.Events[i].State
		if !slices.Contains(next[from], to) {
			return fmt.Sprintf("order %s went from %s to %s", o.ID, from, to)
		}
	}
	if last := o.Events[len(o.Events)-1].State; last != o.State {
		return fmt.Sprintf("order %s is %s but its history ends %s", o.ID, o.State, last)
	}
	return ""
}

// stepState is the state a step answered 200 took the order to.
var stepState = map[string]string{"pay": StatePaid, "cancel": StateCancelled, "refund": StateRefunded, "ship": StateShipped}

// contradicts says how the order's history contradicts answer a; "" when
// it does not.
func (a StepAnswer) contradicts(o *Order) string {
	if a.State != "" && !o.entered(a.State) {
		return fmt.Sprintf("a %s of order %s was answered %d with state %s, which the order never entered (its history: %s)",
			a.Step, o.ID, a.Status, a.State, o.states())
	}
	switch {
	case a.Status/100 == 4 && a.Status != 409:
		return fmt.Sprintf("a %s of order %s was answered %d %s, but the order exists (its history: %s)", a.Step, o.ID, a.Status, a.Problem, o.states())
	case a.Status == 200:
		if want := stepState[a.Step]; want != "" && !o.entered(want) {
			return fmt.Sprintf("a %s of order %s was answered 200, but the order was never %s (its history: %s)", a.Step, o.ID, want, o.states())
		}
	case a.Status == 409 && a.Problem == "order-expired":
		if o.entered(StatePaid) {
			return fmt.Sprintf("a %s of order %s was answered 409 order-expired, but the order was paid (its history: %s)", a.Step, o.ID, o.states())
		}
		if !o.entered(StateExpired) && !o.entered(StateCancelled) {
			return fmt.Sprintf("a %s of order %s was answered 409 order-expired, but the order never expired (its history: %s)", a.Step, o.ID, o.states())
		}
	}
	return ""
}

func (o *Order) states() string {
	out := ""
	for i, ev := range o.Events {
		if i > 0 {
			out += " → "
		}
		out += ev.State
	}
	return out
}
