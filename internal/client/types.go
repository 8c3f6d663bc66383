package client

import (
	"encoding/json"
	"time"
)

// The bodies and answers of the API, as components.schemas of the OpenAPI
// description names them. Integers are int64 whatever their range.

// SaleRequest is the body of POST /sale.
type SaleRequest struct {
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
}

// ProductSaleRequest is the body of POST /products/{id}/sale.
type ProductSaleRequest struct {
	Quantity int64 `json:"quantity"`
}

// SaleOptions are what a sale may carry besides its body. The zero value
// sells as a buyer does: with the fleet default, no key.
type SaleOptions struct {
	// Strategy names the strategy of this sale alone (?strategy=), an admin
	// call: it is sent with the admin token. Empty sells with the fleet
	// default.
	Strategy string
	// IdempotencyKey, when not empty, is sent as the Idempotency-Key
	// header: the same order sent again with it gets the original sale
	// back (Sale.Replayed) instead of a second one.
	IdempotencyKey string
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
	// Replayed is true when the answer is the original sale of a reused
	// Idempotency-Key (Idempotent-Replayed: true), not a new one.
	Replayed bool `json:"-"`
}

// RestockRequest is the body of PUT /products/{id}.
type RestockRequest struct {
	// Quantity is the new quantity and initial stock of the new round.
	Quantity int64 `json:"quantity"`
	// Name is the product's name; empty keeps the current one.
	Name string `json:"name,omitempty"`
	// IdempotencyKey, sent as a header: a repeat with it answers the first
	// restock's result and starts no round. Empty: Restock makes one up.
	IdempotencyKey string `json:"-"`
	// IfRound, sent as If-Match when above 0: the restock happens only if
	// the product is still in that round, else a 412 round-moved Problem.
	IfRound int64 `json:"-"`
}

// Product is a product's stock in its current round.
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

// Round is one round of a product, from the ledger.
type Round struct {
	ProductID string `json:"product_id"`
	Round     int64  `json:"round"`
	Initial   int64  `json:"initial"`
	Sold      int64  `json:"sold"`
	Sales     int64  `json:"sales"`
	Current   bool   `json:"current"`
}

// Holds is the lock holds one replica recorded for a product, oldest first.
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

// StrategyInfo is one entry of GET /strategies.
type StrategyInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Safe        bool   `json:"safe"`
	// Available is whether the replica can sell with it; Needs then names
	// the setting of the lock service it lacks. An answer without the
	// field (from a fleet older than it) counts as available.
	Available bool   `json:"available"`
	Needs     string `json:"needs,omitempty"`
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

// strategyChoice is the body and answer of PUT /strategy and GET /strategy.
type strategyChoice struct {
	Strategy string `json:"strategy"`
}

// Health is the answer of GET /healthz ("ok") and GET /readyz ("ready").
type Health struct {
	Status   string `json:"status"`
	Instance string `json:"instance"`
}

// Live is what the live page shows.
type Live struct {
	At time.Time `json:"at"`
	// Replica is the answering replica's own answers to sales since it
	// started.
	Replica LiveReplica `json:"replica"`
	// Default is the fleet default strategy.
	Default  string        `json:"default"`
	Products []LiveProduct `json:"products"`
	// LastSaleID is the since of the next call.
	LastSaleID int64 `json:"last_sale_id"`
	// SalesSince is the sales after since by strategy, fleet-wide.
	SalesSince map[string]int64 `json:"sales_since"`
}

// LiveReplica is one replica's answers to sales since it started (in its
// memory: a restart starts them over with a new StartedAt).
type LiveReplica struct {
	Instance  string    `json:"instance"`
	StartedAt time.Time `json:"started_at"`
	// Sales is its 200 answers to sales, replays apart.
	Sales int64 `json:"sales"`
	// Refusals is its refusals by problem type slug (sold-out, circuit-open, …).
	Refusals map[string]int64 `json:"refusals"`
}

// LiveProduct is one of the most recently changed products.
type LiveProduct struct {
	ProductID string `json:"product_id"`
	Name      string `json:"name"`
	Quantity  int64  `json:"quantity"`
	Initial   int64  `json:"initial"`
	Round     int64  `json:"round"`
}
