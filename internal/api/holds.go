package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"inventory/internal/stock"
)

// holdTimeLayout is RFC 3339 with all nine digits of nanoseconds, so that
// the times sort as text too.
const holdTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

type holdsResponse struct {
	ProductID string     `json:"product_id"`
	Instance  string     `json:"instance"`
	Holds     []holdJSON `json:"holds"`
}

// holdJSON is one stock.Hold; End and Outcome are null while it is held.
type holdJSON struct {
	Strategy string  `json:"strategy"`
	Fence    int64   `json:"fence"`
	Start    string  `json:"start"`
	End      *string `json:"end"`
	Outcome  *string `json:"outcome"`
}

// handleGetHolds answers the product's lock holds this replica remembers,
// oldest first: what the fault matrix reads from every replica to measure
// overlapping lock holders.
func (s *server) handleGetHolds(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := stock.ValidateProductID(id); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	holds := s.Holds.For(id)
	resp := holdsResponse{ProductID: id, Instance: s.Instance, Holds: make([]holdJSON, len(holds))}
	for i, h := range holds {
		j := holdJSON{Strategy: h.Strategy, Fence: h.Fence, Start: holdTime(h.Start)}
		if !h.End.IsZero() {
			end, outcome := holdTime(h.End), h.Outcome
			j.End, j.Outcome = &end, &outcome
		}
		resp.Holds[i] = j
	}
	writeJSON(w, http.StatusOK, resp)
}

// holdTime is t on the wall clock, in UTC.
func holdTime(t time.Time) string { return t.UTC().Format(holdTimeLayout) }
