package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"inventory/internal/inventory"
	"inventory/internal/stock"
	"inventory/internal/wire"
)

// Orders reads orders and takes the steps of their life. stock.Orders is
// the service's: each step under a lock bound to the order, decided by a
// guarded write in Postgres.
type Orders interface {
	// Get returns order id with its history: inventory.ErrOrderNotFound
	// for none, inventory.ErrBadOrderID for an id that is not a UUID.
	Get(ctx context.Context, id string) (inventory.OrderRecord, error)
	// Step takes step a of order id and returns the order after it; a step
	// the order already took answers it as it is. A refused step
	// (inventory.ErrOrderExpired, inventory.ErrOrderState) returns the
	// order as it is beside its error, and changes nothing.
	Step(ctx context.Context, id string, a inventory.Action) (inventory.OrderRecord, error)
}

var _ Orders = stock.Orders{}

// handleGetOrder is GET /orders/{id}: the order, its state and its history.
func (s *server) handleGetOrder(w http.ResponseWriter, r *http.Request) {
	id, err := orderID(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	o, err := s.Orders.Get(r.Context(), id)
	if err != nil {
		s.writeProblem(w, r, err, "order_id", id)
		return
	}
	writeJSON(w, http.StatusOK, toOrder(o))
}

// handleOrderStep is POST /orders/{id}/{a}: step a of the order's life.
// The request's body, if any, is not read (as POST
// /products/{id}/circuit's), and an Idempotency-Key means nothing: a
// repeated step answers the order as it is.
func (s *server) handleOrderStep(a inventory.Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := orderID(r)
		if err != nil {
			k := classify(err)
			s.Metrics.OrderStep(string(a), k.slug)
			s.writeClassified(w, r, k, err)
			return
		}
		o, err := s.Orders.Step(r.Context(), id, a)
		k := stepKind(err, a, o)
		s.Metrics.OrderStep(string(a), k.slug)
		if err != nil {
			p := problemFor(r, k, err)
			if k.slug == "order-expired" || k.slug == "order-state" {
				p.State = string(o.State)
			}
			s.sendProblem(w, r, k, err, p, "order_id", id, "step", string(a))
			return
		}
		writeJSON(w, http.StatusOK, toOrder(o))
	}
}

// stepKind is classify's row for the error of step a, told in a step's
// words: classify's sentences for a lock's problems and a lost COMMIT
// speak of a sale, and the refusals can say what the order is (o, the
// order as it is; zero when unknown). Repeating a step is always safe
// (a step taken answers the order as it is), so every 503 of a step says
// Retry-After, outcome-unknown's too.
func stepKind(err error, a inventory.Action, o inventory.OrderRecord) kind {
	k := classify(err)
	switch k.slug {
	case "order-expired":
		if o.ID != "" {
			k.detail = fmt.Sprintf("The order was due by %s; it can no longer be paid, and its units go back to the stock. Nothing changed.",
				o.ExpiresAt.UTC().Format(time.RFC3339Nano))
		}
	case "order-state":
		if o.ID != "" {
			k.detail = fmt.Sprintf("The order is %s; to %s, it must be %s. Nothing changed.", o.State, a, a.From())
		}
	case "lock-timeout":
		k.detail = "Another call on this order held its lock for longer than this one could wait; nothing changed. Try again shortly."
	case "lock-lost":
		k.detail = "The step lost the order's lock before it committed and was rolled back; nothing changed. Try again shortly."
	case "outcome-unknown":
		k.detail = "The step may or may not have been taken: the database did not confirm it in time. Repeat it: a step the order already took answers the order as it is."
		k.retry = true
	}
	return k
}

// orderID is the order id of r's path, or inventory.ErrBadOrderID.
func orderID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	return id, inventory.ValidateOrderID(id)
}

// toOrder is o as GET /orders/{id} and the steps answer it, times in UTC.
func toOrder(o inventory.OrderRecord) wire.Order {
	out := wire.Order{OrderID: o.ID, ProductID: o.ProductID, Quantity: o.Quantity, State: string(o.State),
		ExpiresAt: o.ExpiresAt.UTC(), Round: int64(o.Round), History: make([]wire.OrderEvent, len(o.History))}
	for i, e := range o.History {
		out.History[i] = wire.OrderEvent{State: string(e.State), At: e.At.UTC(), By: e.By}
	}
	return out
}
