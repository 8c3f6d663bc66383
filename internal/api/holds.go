package api

import (
	"net/http"

	"inventory/internal/wire"
)

// handleGetHolds answers the product's lock holds this replica remembers,
// oldest first: what the fault matrix reads from every replica to measure
// overlapping lock holders.
func (s *server) handleGetHolds(w http.ResponseWriter, r *http.Request) {
	id, ok := s.productID(w, r)
	if !ok {
		return
	}
	holds := s.Holds.For(id)
	resp := wire.Holds{ProductID: id, Instance: s.Instance, Holds: make([]wire.Hold, len(holds))}
	for i, h := range holds {
		resp.Holds[i] = wire.Hold{Strategy: h.Strategy, Fence: h.Fence, Start: h.Start, End: h.End, Outcome: h.Outcome}
	}
	writeJSON(w, http.StatusOK, resp)
}
