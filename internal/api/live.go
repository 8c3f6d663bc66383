package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"inventory/internal/postgres"
	"inventory/internal/wire"
)

// livePage is GET /: one self-contained page (no external assets) that
// polls GET /live every second.
//
//go:embed live.html
var livePage []byte

// liveProducts is how many products GET /live lists, most recently changed
// first, and liveRounds how many of each one's rounds, newest first.
const (
	liveProducts = 20
	liveRounds   = 20
)

// tally counts a replica's answers to sales by result: classify's slug,
// or "replayed". The zero value is ready.
type tally struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (t *tally) add(result string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]int64{}
	}
	t.counts[result]++
}

// snapshot is the sales (results "ok") and the refusals by kind so far;
// replayed sales are neither.
func (t *tally) snapshot() (sales int64, refusals map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	refusals = map[string]int64{}
	for result, n := range t.counts {
		switch result {
		case "ok":
			sales = n
		case "replayed":
		default:
			refusals[result] = n
		}
	}
	return sales, refusals
}

// saleAnswered counts a sale's answer in the metrics and in the replica's
// own tally.
func (s *server) saleAnswered(strategy, result string, took time.Duration) {
	s.Metrics.Sale(strategy, result, took)
	s.answers.add(result)
}

func (s *server) handleIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(livePage)
}

// handleLive is GET /live?since=ID: the products with their orders, the
// fleet default, and the sales after ledger id ID, fleet-wide.
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
	orders, err := s.Store.OrderCounts(r.Context(), products)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	rounds, err := s.Store.Rounds(r.Context(), products, liveRounds)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	def, _ := s.Default.Get(r.Context())
	sales, refusals := s.answers.snapshot()
	out := liveOut{Live: wire.Live{At: time.Now().UTC(), Default: def, LastSaleID: last, SalesSince: counts,
		Replica: wire.LiveReplica{Instance: s.Instance, StartedAt: s.started, Sales: sales, Refusals: refusals}},
		Products: []liveProductOut{}}
	for _, p := range products {
		o := orders[p.ID]
		raw, err := s.rounds.of(p.ID, rounds[p.ID])
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		out.Products = append(out.Products, liveProductOut{LiveProduct: wire.LiveProduct{ProductID: p.ID, Name: p.Name, Quantity: p.Quantity,
			Initial: p.Initial, Round: int64(p.Round), Orders: wire.LiveOrders{Held: o.Held, Paid: o.Paid, Shipped: o.Shipped,
				Cancelled: o.Cancelled, Expired: o.Expired, Refunded: o.Refunded, ReturnedUnits: o.Returned}},
			Rounds: raw})
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// liveOut is wire.Live as the server writes it: each product's rounds
// already in JSON (liveProduct).
type liveOut struct {
	wire.Live
	Products []liveProductOut `json:"products"` // hides wire.Live's
}

// liveProductOut is wire.LiveProduct with its rounds already in JSON: made
// once per read of them (roundsJSON), not once per answer; encoding 20
// products' 20 rounds each was most of an answer's cost.
type liveProductOut struct {
	wire.LiveProduct
	Rounds json.RawMessage `json:"rounds,omitempty"` // hides wire.LiveProduct's
}

// roundsJSON keeps each product's rounds in JSON, as of the read of them
// they were made from. The zero value is ready.
type roundsJSON struct {
	mu   sync.Mutex
	made map[string]madeRounds
}

// madeRounds is a product's rounds in JSON and the read they come from:
// its first story, which every reader of that read shares (Store.Rounds
// hands them the same slice) and a new read replaces.
type madeRounds struct {
	from *postgres.RoundStory
	raw  json.RawMessage
}

// of is product id's rounds, stories, in JSON: made now unless already
// made from the same read.
func (c *roundsJSON) of(id string, stories []postgres.RoundStory) (json.RawMessage, error) {
	if len(stories) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.made[id]; ok && m.from == &stories[0] {
		return m.raw, nil
	}
	raw, err := json.Marshal(toLiveRounds(stories))
	if err != nil {
		return nil, fmt.Errorf("live: encode the rounds of %q: %w", id, err)
	}
	if c.made == nil || len(c.made) > 4*liveProducts { // products the page no longer shows
		c.made = map[string]madeRounds{}
	}
	c.made[id] = madeRounds{from: &stories[0], raw: raw}
	return raw, nil
}

// toLiveRounds is a product's rounds as GET /live gives them.
func toLiveRounds(stories []postgres.RoundStory) []wire.LiveRound {
	out := make([]wire.LiveRound, 0, len(stories))
	for _, st := range stories {
		lr := wire.LiveRound{Round: int64(st.Round.Round), Current: st.Current, StartedAt: st.StartedAt.UTC(), Initial: st.Initial,
			Sold: st.Sold, Sales: st.Sales, UnitsByStrategy: st.Strategies}
		if st.Current {
			stock := st.Stock
			lr.Stock = &stock
		}
		lr.OversoldUnits = oversoldUnits(st)
		lr.Oversold = lr.OversoldUnits > 0
		if c := st.Circuit; c != nil {
			lc := &wire.LiveCircuit{State: circuitState(st), Kind: c.Kind, Quantity: c.Quantity, Initial: c.Initial, Sold: c.Sold,
				OpenedAt: c.OpenedAt.UTC(), OpenedBy: c.OpenedBy}
			if !c.ClosedAt.IsZero() {
				closed := c.ClosedAt.UTC()
				lc.ClosedAt = &closed
			}
			lr.Circuit = lc
		}
		out = append(out, lr)
	}
	return out
}

// oversoldUnits is how many units round st sold beyond what it had, the
// most any evidence shows: its ledger's kept units above its initial; for
// the current round, its stock below zero; and the stock below zero, or
// the ledger above the initial, that the watchdog saw when it opened the
// round's circuit (an ended round's last stock is kept nowhere else). An
// unsafe strategy's lost update can leave the stock at 0 with the ledger
// above the initial, so the stock alone does not tell.
func oversoldUnits(st postgres.RoundStory) int64 {
	n := max(0, st.Sold-st.Initial)
	if st.Current {
		n = max(n, -st.Stock)
	}
	if c := st.Circuit; c != nil {
		n = max(n, -c.Quantity, c.Sold-c.Initial)
	}
	return n
}

// circuitState is the state of the circuit opened on round st: open only
// while the round is current (a restock's new round is not covered).
func circuitState(st postgres.RoundStory) string {
	switch {
	case !st.Circuit.Open:
		return wire.CircuitClosed
	case st.Current:
		return wire.CircuitOpen
	default:
		return wire.CircuitEnded
	}
}
