package load

import (
	"net/http"
	"time"

	"inventory/internal/history"
)

// DefaultHistoryBudget bounds the history check of each window of a
// product's history (see internal/history): 10 s, and 1 ms more per op.
// Measured on the 2-core box (docs/loadtest.md): a history whose answers
// are all definite checks at about 45,000 ops a second, so the budget is
// far above what a sound history needs; one with a few sales whose outcome
// nobody knows can take porcupine longer than any budget (200 ops, 2% of
// them unknown: not in 10 s), which is why the fault matrix settles those
// from the ledger first. Past it a window is INCONCLUSIVE,
// and a safe row with an INCONCLUSIVE history fails.
var DefaultHistoryBudget = history.Scaled(10*time.Second, time.Millisecond)

// History is the check of a run's history of answers, product by product,
// against a sequential model of the product (internal/history): whether one
// order of events explains every answer the buyers got.
type History struct {
	// Verdict is LINEARIZABLE, NOT LINEARIZABLE or INCONCLUSIVE (the check
	// ran out of time: not a pass).
	Verdict string `json:"verdict"`
	// Ops is the operations checked (sales with a definite failure, which
	// constrain nothing, left out), the database's final readings included.
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"` // how long the check took, every product
	// Windows is how many windows the products' histories were checked in
	// (a product's history is cut at a reading of the database taken while
	// none of its ops was in flight), and Settled how many sales whose
	// answer did not say whether they sold were settled from the ledger's
	// rows by Idempotency-Key before the check.
	Windows int `json:"windows"`
	Settled int `json:"settled_from_ledger,omitempty"`
	// Unknown is the ops checked whose outcome nobody knew, settling done:
	// each may or may not have taken effect, and a few of them near a
	// sell-out can take porcupine longer than any budget.
	Unknown int `json:"unknown_ops,omitempty"`
	// Products is every product whose verdict is not LINEARIZABLE.
	Products []HistoryProduct `json:"products,omitempty"`

	failed []history.ProductResult // the same, for their visualizations
	result history.Result          // the whole check, for the verdict
}

// HistoryProduct is one product whose history no order explained, or whose
// check ran out of time.
type HistoryProduct struct {
	Product   string  `json:"product"`
	Verdict   string  `json:"verdict"`
	Violation string  `json:"violation,omitempty"` // false sold-out, phantom sale, final stock, restock, …
	Evidence  string  `json:"evidence,omitempty"`
	Ops       int     `json:"ops"`
	Seconds   float64 `json:"seconds"`
	// Visualization is the path of porcupine's HTML page for it, once
	// written (WriteVisualizations).
	Visualization string `json:"visualization,omitempty"`
}

// WriteVisualizations writes porcupine's HTML page of every product of h
// that was NOT LINEARIZABLE, to path(product), at most limit of them, and
// records each path.
func (h *History) WriteVisualizations(path func(product string) string, limit int) ([]string, error) {
	var out []string
	for i, p := range h.failed {
		if len(out) >= limit || p.Verdict != history.NotLinearizable {
			continue
		}
		file := path(p.Product)
		if err := p.WriteHTML(file); err != nil {
			return out, err
		}
		h.Products[i].Visualization = file
		out = append(out, file)
	}
	return out, nil
}

// checkHistory checks ops, each window of each product within budget.
func checkHistory(initial, final map[string]history.State, ops []history.Op, budget history.Budget) *History {
	began := time.Now()
	res := history.Check(initial, final, ops, budget)
	h := &History{Verdict: string(res.Verdict), result: res}
	for _, op := range ops {
		if op.Outcome == history.Unknown {
			h.Unknown++
		}
	}
	for _, p := range res.Products {
		h.Ops += p.Ops
		h.Windows += p.Windows
		if p.Verdict == history.Linearizable {
			continue
		}
		h.failed = append(h.failed, p)
		h.Products = append(h.Products, HistoryProduct{
			Product: p.Product, Verdict: string(p.Verdict), Violation: p.Violation, Evidence: p.Evidence,
			Ops: p.Ops, Seconds: p.Took.Seconds(),
		})
	}
	h.Seconds = time.Since(began).Seconds()
	return h
}

// historyOutcome is what an answer says happened, for the history: a 2xx
// sold; a 409 is sold out; an answer that may have sold is unknown (503
// outcome-unknown, 5xx other than 503, no answer at all — a timeout or a
// lost connection — or, for a buyer who retried, any attempt that was
// unknown before a definite failure); any other 4xx or 503 is a definite
// failure that sold nothing.
func (o outcome) historyOutcome() history.Outcome {
	switch {
	case o.status/100 == 2:
		return history.Sold
	case o.status == http.StatusConflict:
		return history.SoldOut
	case o.unknown, o.status == 0, o.maybe:
		return history.Unknown
	case o.status == http.StatusServiceUnavailable, o.status/100 == 4:
		return history.Failed
	}
	return history.Unknown // 500, 502, 504: the sale may have committed
}

// op is o as one operation of client's history: a sale of one unit of
// product with Idempotency-Key key ("" for none), sent at start (its first
// attempt) and answered at end (its last).
func (o outcome) op(client int, product, key string, start, end time.Time) history.Op {
	op := history.Op{Client: client, Product: product, Kind: history.Sale, Quantity: 1, Outcome: o.historyOutcome(),
		Remaining: -1, Start: start, End: end, Key: key}
	if op.Outcome == history.Sold {
		op.Round = int(o.round)
		if o.remainingKnown && !o.replayed {
			op.Remaining = o.remaining
		}
	}
	return op
}
