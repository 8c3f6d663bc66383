package api

import (
	"fmt"
	"net/http"

	"inventory/internal/inventory"
	"inventory/internal/watchdog"
	"inventory/internal/wire"
)

// handleCloseCircuit closes the product's sale circuit for the fleet: every
// replica sells it again at once (the others find it closed at their next
// refused sale). The evidence stays recorded, so only new evidence opens it again.
func (s *server) handleCloseCircuit(w http.ResponseWriter, r *http.Request) {
	id, ok := s.productID(w, r)
	if !ok {
		return
	}
	resp := wire.Circuit{ProductID: id, Instance: s.Instance}
	if s.Circuits != nil {
		c, ok, err := s.Circuits.Close(r.Context(), id)
		if err != nil {
			s.writeProblem(w, r, fmt.Errorf("%w: %w", inventory.ErrUnavailable, err))
			return
		}
		if ok {
			resp.Closed = toClosedCircuit(c)
			s.log.InfoContext(r.Context(), "circuit closed", "product_id", id, "evidence", c.Violation.String(), "request_id", requestID(r))
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// toClosedCircuit is the evidence c was opened on, as the answer gives it.
func toClosedCircuit(c watchdog.Circuit) *wire.ClosedCircuit {
	return &wire.ClosedCircuit{
		Round: int64(c.Round), Kind: c.Kind, Quantity: c.Quantity, Initial: c.Initial, Sold: c.Sold,
		OpenedAt: c.OpenedAt.UTC(), OpenedBy: c.OpenedBy,
	}
}
