package client

import "inventory/internal/wire"

// The bodies and answers of the API are package wire's, shared with the
// service; these names keep the client's calls reading as they always
// have.
type (
	// SaleRequest is the body of POST /sale.
	SaleRequest = wire.SaleRequest
	// ProductSaleRequest is the body of POST /products/{id}/sale.
	ProductSaleRequest = wire.ProductSaleRequest
	// Sale is the answer to a sale; Replayed is its Idempotent-Replayed
	// header.
	Sale = wire.Sale
	// HeldSale is the answer to a hold (a sale with PayWithin): the order
	// holding the units; Replayed is its Idempotent-Replayed header.
	HeldSale = wire.HeldSale
	// Order is an order with its history: the answer of GET /orders/{id}
	// and of its steps.
	Order = wire.Order
	// OrderEvent is one state an order entered.
	OrderEvent = wire.OrderEvent
	// RestockRequest is the body of PUT /products/{id}, with its
	// Idempotency-Key and If-Match headers.
	RestockRequest = wire.RestockRequest
	// Product is a product's stock in its current round.
	Product = wire.Product
	// Round is one round of a product, from the ledger.
	Round = wire.Round
	// Holds is the lock holds one replica recorded for a product.
	Holds = wire.Holds
	// Hold is one critical section under a strategy's lock.
	Hold = wire.Hold
	// StrategyInfo is one entry of GET /strategies.
	StrategyInfo = wire.StrategyInfo
	// Health is the answer of GET /healthz and GET /readyz.
	Health = wire.Health
	// Live is what the live page shows.
	Live = wire.Live
	// LiveReplica is one replica's answers to sales since it started.
	LiveReplica = wire.LiveReplica
	// LiveProduct is one of the most recently changed products.
	LiveProduct = wire.LiveProduct
	// LiveRound is one round of a product: sold of initial, by which
	// strategies, oversold or not, its circuit.
	LiveRound = wire.LiveRound
	// LiveCircuit is a sale circuit the watchdog opened on a round.
	LiveCircuit = wire.LiveCircuit
)

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
