package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"inventory/internal/stock"
	"inventory/internal/watchdog"
)

// circuitResponse is POST /products/{id}/circuit's answer.
type circuitResponse struct {
	ProductID string `json:"product_id"`
	Open      bool   `json:"open"`
	// Closed is the circuit this call closed, with the evidence it was
	// opened on; null when none was open.
	Closed   *closedCircuit `json:"closed"`
	Instance string         `json:"instance"`
}

type closedCircuit struct {
	Round    int    `json:"round"`
	Kind     string `json:"kind"`
	Quantity int64  `json:"quantity"`
	Initial  int64  `json:"initial"`
	Sold     int64  `json:"sold"`
	OpenedAt string `json:"opened_at"`
	OpenedBy string `json:"opened_by"`
}

// handleCloseCircuit closes the product's sale circuit for the fleet: every
// replica sells it again at once (the others find it closed at their next
// refused sale). The evidence stays recorded, so only new evidence opens it again.
func (s *server) handleCloseCircuit(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := stock.ValidateProductID(id); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	resp := circuitResponse{ProductID: id, Instance: s.Instance}
	if s.Circuits != nil {
		c, ok, err := s.Circuits.Close(r.Context(), id)
		if err != nil {
			s.writeProblem(w, r, fmt.Errorf("%w: %w", stock.ErrUnavailable, err))
			return
		}
		if ok {
			resp.Closed = toClosedCircuit(c)
			s.log.InfoContext(r.Context(), "circuit closed", "product_id", id, "evidence", c.Violation.String(), "request_id", requestID(r))
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func toClosedCircuit(c watchdog.Circuit) *closedCircuit {
	return &closedCircuit{
		Round: c.Round, Kind: c.Kind, Quantity: c.Quantity, Initial: c.Initial, Sold: c.Sold,
		OpenedAt: c.OpenedAt.UTC().Format(time.RFC3339Nano), OpenedBy: c.OpenedBy,
	}
}
