package wire

import (
	"encoding/json"
	"time"
)

// SaleRequest is the body of POST /sale.
type SaleRequest struct {
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
	// PayWithin, when not empty, makes the sale a hold: a Go duration
	// ("15m", "90s", from 1s to 24h) within which the order must be paid,
	// or it expires and its units come back. Empty: a final sale, and the
	// body is as it always was.
	PayWithin string `json:"pay_within,omitempty"`
}

// ProductSaleRequest is the body of POST /products/{id}/sale: the product
// is in the path.
type ProductSaleRequest struct {
	Quantity int64 `json:"quantity"`
	// PayWithin is SaleRequest's: empty for a final sale.
	PayWithin string `json:"pay_within,omitempty"`
}

// SaleBody is a sale's body as the service reads it, POST /sale's or
// (without ProductID) POST /products/{id}/sale's: a member the body left
// out, or gave as null, is nil, so that a missing one is told apart from a
// zero (which is a bad quantity, not a malformed body).
type SaleBody struct {
	ProductID *string `json:"product_id"`
	Quantity  *int64  `json:"quantity"`
	// PayWithin is the hold's payment deadline as sent; nil (absent or
	// null) for a final sale.
	PayWithin *string `json:"pay_within"`
}

// ProductSaleBody is POST /products/{id}/sale's body as the service reads
// it: a body naming a product_id is refused as an unknown member.
type ProductSaleBody struct {
	Quantity  *int64  `json:"quantity"`
	PayWithin *string `json:"pay_within"`
}

// Sale is the answer to a sale.
type Sale struct {
	SaleID    int64  `json:"sale_id"`
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
	// Remaining is the units left after the sale (below zero only when an
	// unsafe strategy oversold).
	Remaining int64 `json:"remaining"`
	// Round is the round whose stock the sale decremented.
	Round    int64  `json:"round"`
	Strategy string `json:"strategy"`
	// Instance is the replica that sold: the answer's instance, or its
	// X-Instance header when the body does not say.
	Instance string `json:"instance"`
	// Replayed is the Idempotent-Replayed: true header, not a member: the
	// answer is the original sale of a reused Idempotency-Key, not a new
	// one.
	Replayed bool `json:"-"`
}

// HeldSale is the answer to a sale that holds its units for an order (a
// body with pay_within): 201, with Location /orders/{order_id}.
type HeldSale struct {
	OrderID   string `json:"order_id"`
	SaleID    int64  `json:"sale_id"`
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
	// State is the order's state when the answer was read: held for a new
	// hold; a replay (Idempotent-Replayed) tells the state it is in now.
	State string `json:"state"`
	// ExpiresAt is the payment deadline, by Postgres's clock.
	ExpiresAt time.Time `json:"expires_at"`
	Remaining int64     `json:"remaining"`
	Round     int64     `json:"round"`
	Strategy  string    `json:"strategy"`
	Instance  string    `json:"instance"`
	// Replayed is the Idempotent-Replayed: true header, not a member.
	Replayed bool `json:"-"`
}

// Order is an order and its history: the answer of GET /orders/{id} and
// of its steps (POST /orders/{id}/pay, cancel, refund, ship).
type Order struct {
	OrderID   string `json:"order_id"`
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
	// State is held, paid, shipped, cancelled, expired or refunded.
	State     string    `json:"state"`
	ExpiresAt time.Time `json:"expires_at"`
	// Round is the round whose stock the order's units left.
	Round int64 `json:"round"`
	// History is every state the order entered, oldest first.
	History []OrderEvent `json:"history"`
}

// OrderEvent is one state an order entered, when (by Postgres's clock),
// and by whom: a replica's instance name, or expiry@<instance> for the
// expiry job.
type OrderEvent struct {
	State string    `json:"state"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
}

// RestockRequest is the body of PUT /products/{id}, with the headers that
// make it safe to send again.
type RestockRequest struct {
	// Quantity is the new quantity and initial stock of the new round.
	Quantity int64 `json:"quantity"`
	// Name is the product's name; empty keeps the current one.
	Name string `json:"name,omitempty"`
	// IdempotencyKey is the Idempotency-Key header, not a member: a repeat
	// with it answers the first restock's result and starts no round.
	IdempotencyKey string `json:"-"`
	// IfRound, when above 0, is the If-Match header ("3"), not a member:
	// the restock happens only if the product is still in that round, else
	// a 412 round-moved problem.
	IfRound int64 `json:"-"`
}

// RestockBody is PUT /products/{id}'s body as the service reads it:
// Quantity is nil when the body left it out or gave null (0 is a restock
// to nothing).
type RestockBody struct {
	Quantity *int64 `json:"quantity"`
	Name     string `json:"name"`
}

// Product is a product's stock in its current round: the answer of GET and
// PUT /products/{id}.
type Product struct {
	ProductID string `json:"product_id"`
	Name      string `json:"name"`
	// Quantity is the units left (below zero only when an unsafe strategy
	// oversold).
	Quantity int64 `json:"quantity"`
	Initial  int64 `json:"initial"`
	// Sold and Sales are the units and rows of the current round's ledger.
	Sold    int64 `json:"sold"`
	Sales   int64 `json:"sales"`
	Round   int64 `json:"round"`
	Version int64 `json:"version"`
}

// Round is one round of a product, from the ledger: the answer of GET
// /products/{id}/rounds/{round}.
type Round struct {
	ProductID string `json:"product_id"`
	Round     int64  `json:"round"`
	Initial   int64  `json:"initial"`
	Sold      int64  `json:"sold"`
	Sales     int64  `json:"sales"`
	Current   bool   `json:"current"`
}

// Holds is the lock holds one replica recorded for a product, oldest
// first: the answer of GET /products/{id}/holds.
type Holds struct {
	ProductID string `json:"product_id"`
	// Instance is the replica that recorded them.
	Instance string `json:"instance"`
	Holds    []Hold `json:"holds"`
}

// Hold is one critical section under a strategy's lock, on the replica's
// wall clock.
type Hold struct {
	Strategy string `json:"strategy"`
	// Fence is the lease's fencing token; 0 for a lock without one.
	Fence int64     `json:"fence"`
	Start time.Time `json:"start"`
	// End and Outcome are zero while the lock is held (null in the answer).
	End     time.Time `json:"end"`
	Outcome string    `json:"outcome"`
}

// holdTimeLayout is RFC 3339 with all nine digits of nanoseconds, so that
// the times of holds sort as text too.
const holdTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// MarshalJSON writes the hold with its times in UTC to the nanosecond
// (holdTimeLayout), and end and outcome null while it is held.
func (h Hold) MarshalJSON() ([]byte, error) {
	type hold struct {
		Strategy string  `json:"strategy"`
		Fence    int64   `json:"fence"`
		Start    string  `json:"start"`
		End      *string `json:"end"`
		Outcome  *string `json:"outcome"`
	}
	out := hold{Strategy: h.Strategy, Fence: h.Fence, Start: h.Start.UTC().Format(holdTimeLayout)}
	if !h.End.IsZero() {
		end, outcome := h.End.UTC().Format(holdTimeLayout), h.Outcome
		out.End, out.Outcome = &end, &outcome
	}
	return json.Marshal(out)
}

// StrategyInfo is one entry of GET /strategies.
type StrategyInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Safe        bool   `json:"safe"`
	// Available is false when the replica was started without the lock
	// service the strategy needs; Needs then names its setting. An answer
	// without the member (from a fleet older than it) reads as available.
	Available bool   `json:"available"`
	Needs     string `json:"needs,omitempty"`
	// What the strategy is: the lock backend it takes a product's lock
	// from ("" none), whether it keeps state in the service's Redis,
	// whether it commits many sales per transaction. Faults choose the
	// strategies they apply to by these.
	LockBackend string `json:"lock_backend"`
	UsesRedis   bool   `json:"uses_redis"`
	Batches     bool   `json:"batches"`
}

// UnmarshalJSON reads an entry, Available true unless it says otherwise.
func (s *StrategyInfo) UnmarshalJSON(b []byte) error {
	type plain StrategyInfo
	p := plain{Available: true}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = StrategyInfo(p)
	return nil
}

// StrategyChoice is the fleet default strategy: the answer of GET
// /strategy, and the body and answer of PUT /strategy.
type StrategyChoice struct {
	Strategy string `json:"strategy"`
}

// StrategyChoiceBody is PUT /strategy's body as the service reads it:
// Strategy is nil when the body left it out or gave null.
type StrategyChoiceBody struct {
	Strategy *string `json:"strategy"`
}

// Health is the answer of GET /healthz (Status "ok") and GET /readyz
// ("ready").
type Health struct {
	Status   string `json:"status"`
	Instance string `json:"instance"`
}

// Circuit is the answer of POST /products/{id}/circuit.
type Circuit struct {
	ProductID string `json:"product_id"`
	// Open is whether the circuit is open after the call (always false).
	Open bool `json:"open"`
	// Closed is the circuit the call closed, with the evidence it was
	// opened on; nil (null) when none was open.
	Closed   *ClosedCircuit `json:"closed"`
	Instance string         `json:"instance"`
}

// ClosedCircuit is the evidence a closed circuit was opened on, as the
// invariant watchdog saw it.
type ClosedCircuit struct {
	Round int64 `json:"round"`
	// Kind is negative_stock or ledger_mismatch.
	Kind     string `json:"kind"`
	Quantity int64  `json:"quantity"`
	Initial  int64  `json:"initial"`
	Sold     int64  `json:"sold"`
	// OpenedAt is written as RFC 3339 with nanoseconds, as its writer gives
	// it (the service gives UTC).
	OpenedAt time.Time `json:"opened_at"`
	// OpenedBy is the replica whose watchdog opened it.
	OpenedBy string `json:"opened_by"`
}

// Live is what the live page shows: the answer of GET /live.
type Live struct {
	At time.Time `json:"at"`
	// Replica is the answering replica's own answers to sales since it
	// started; nginx round-robins GET /live, so a page polling it hears
	// from every replica in turn.
	Replica LiveReplica `json:"replica"`
	// Default is the fleet default strategy.
	Default  string        `json:"default"`
	Products []LiveProduct `json:"products"`
	// LastSaleID is the cursor of the next call's ?since=.
	LastSaleID int64 `json:"last_sale_id"`
	// SalesSince counts, by strategy, the sales after ?since= (fleet-wide,
	// from the ledger); empty without ?since=.
	SalesSince map[string]int64 `json:"sales_since"`
}

// LiveReplica is one replica's answers to sales since it started, kept in
// its memory (a restart starts them over, with a new StartedAt): the live
// page turns two answers of the same replica into rates.
type LiveReplica struct {
	Instance  string    `json:"instance"`
	StartedAt time.Time `json:"started_at"`
	// Sales is its 200 answers to sales, replays apart.
	Sales int64 `json:"sales"`
	// Refusals is its refusals by problem type slug (sold-out,
	// circuit-open, lock-timeout, …).
	Refusals map[string]int64 `json:"refusals"`
}

// LiveProduct is one of the most recently changed products.
type LiveProduct struct {
	ProductID string `json:"product_id"`
	Name      string `json:"name"`
	Quantity  int64  `json:"quantity"`
	Initial   int64  `json:"initial"`
	Round     int64  `json:"round"`
	// Orders are the orders of the current round by the state each is in
	// now; a count may be up to a second old (one count serves every
	// reader).
	Orders LiveOrders `json:"orders"`
	// Rounds are the product's rounds on this fleet's database, newest
	// (the current one) first, at most 20: so an oversell stays told after
	// a restock ended its round. Up to a second old, like Orders. Absent
	// from a replica older than them.
	Rounds []LiveRound `json:"rounds,omitempty"`
}

// Circuit states of a LiveRound's circuit.
const (
	// CircuitOpen: the product's sales are refused now (its round is the
	// current one) until an admin closes it.
	CircuitOpen = "open"
	// CircuitClosed: an admin closed it.
	CircuitClosed = "closed"
	// CircuitEnded: a restock started a new round, which it does not cover.
	CircuitEnded = "ended"
)

// LiveRound is one round of a product: what it started with, what it sold
// and by which strategies, whether it oversold, and the sale circuit the
// invariant watchdog opened on it.
type LiveRound struct {
	Round   int64 `json:"round"`
	Current bool  `json:"current"`
	// StartedAt is when the restock that began it committed.
	StartedAt time.Time `json:"started_at"`
	Initial   int64     `json:"initial"`
	// Sold is the units its sales took and kept (the ledger less the units
	// returned to it), Sales its ledger rows.
	Sold  int64 `json:"sold"`
	Sales int64 `json:"sales"`
	// Stock is the product's stock, for the current round only (a restock
	// overwrites an ended round's).
	Stock *int64 `json:"stock,omitempty"`
	// Oversold is whether it sold more than it had: Sold above Initial, or
	// the stock below zero (now, or when the watchdog looked);
	// OversoldUnits is by how much.
	Oversold      bool  `json:"oversold"`
	OversoldUnits int64 `json:"oversold_units"`
	// UnitsByStrategy are its ledger's units by the strategy that sold
	// them (returns not taken off).
	UnitsByStrategy map[string]int64 `json:"units_by_strategy"`
	// Circuit is the circuit the watchdog opened on this round; absent
	// when none was (or a later round of the product tripped one since:
	// each product keeps its last).
	Circuit *LiveCircuit `json:"circuit,omitempty"`
}

// LiveCircuit is a sale circuit the invariant watchdog opened on a round,
// with what it saw.
type LiveCircuit struct {
	// State is CircuitOpen, CircuitClosed or CircuitEnded.
	State string `json:"state"`
	// Kind is what broke: negative_stock or ledger_mismatch.
	Kind string `json:"kind"`
	// Quantity, Initial and Sold are the round's stock, initial and
	// ledger units when the watchdog saw it.
	Quantity int64     `json:"quantity"`
	Initial  int64     `json:"initial"`
	Sold     int64     `json:"sold"`
	OpenedAt time.Time `json:"opened_at"`
	OpenedBy string    `json:"opened_by"`
	// ClosedAt is when an admin closed it (State CircuitClosed).
	ClosedAt *time.Time `json:"closed_at,omitempty"`
}

// LiveOrders are one product's orders in its current round by the state
// each is in now (every order is in one), and the units returned.
type LiveOrders struct {
	Held      int64 `json:"held"`
	Paid      int64 `json:"paid"`
	Shipped   int64 `json:"shipped"`
	Cancelled int64 `json:"cancelled"`
	Expired   int64 `json:"expired"`
	Refunded  int64 `json:"refunded"`
	// ReturnedUnits are the units the round's cancelled, expired and
	// refunded orders gave back to its stock.
	ReturnedUnits int64 `json:"returned_units"`
}
