package api

import (
	_ "embed"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// livePage is GET /: one self-contained page (no external assets) that
// polls GET /live every second.
//
//go:embed live.html
var livePage []byte

// liveProducts is how many products GET /live lists, most recently changed first.
const liveProducts = 20

type liveProduct struct {
	ProductID string `json:"product_id"`
	Name      string `json:"name"`
	Quantity  int64  `json:"quantity"`
	Initial   int64  `json:"initial"`
	Round     int    `json:"round"`
}

type liveResponse struct {
	At       time.Time     `json:"at"`
	Default  string        `json:"default"`
	Products []liveProduct `json:"products"`
	// LastSaleID is the cursor for the next call's ?since=.
	LastSaleID int64 `json:"last_sale_id"`
	// SalesSince counts, by strategy, the sales after ?since= (fleet-wide,
	// from the ledger); empty without ?since=.
	SalesSince map[string]int64 `json:"sales_since"`
}

func (s *server) handleIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(livePage)
}

// handleLive is GET /live?since=ID: the products, the fleet default, and
// the sales after ledger id ID, fleet-wide.
func (s *server) handleLive(w http.ResponseWriter, r *http.Request) {
	since := int64(-1)
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeProblem(w, r, fmt.Errorf("%w: since must be a sale id (a whole number, 0 or more), got %q", errMalformed, v))
			return
		}
		since = n
	}
	products, err := s.Store.Products(r.Context(), liveProducts)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	counts, last, err := s.Store.SalesSince(r.Context(), since)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	def, _ := s.Default.Get(r.Context())
	out := liveResponse{At: time.Now().UTC(), Default: def, Products: []liveProduct{}, LastSaleID: last, SalesSince: counts}
	for _, p := range products {
		out.Products = append(out.Products, liveProduct{p.ID, p.Name, p.Quantity, p.Initial, p.Round})
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
