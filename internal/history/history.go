// Package history records what every buyer was told and checks, product by
// product, that one order of events explains all of it: each answer must be
// what a single, sequential stock would have given at some moment between
// the request and its answer (linearizability: an order found by the
// search of search.go and certified, or else porcupine's verdict).
//
// The model of one product is its stock and round. A sale of q answered
// "sold" needs stock ≥ q and leaves stock − q (the answer's remaining, when
// given, must match); "sold out" needs stock < q; a definite failure
// changes nothing; an unknown outcome may or may not have sold. A hold is
// a sale: its units are gone until they return. A return (a cancel or
// refund answered 200, an expiry) gives q back to its round at some moment
// inside its window; one with an unknown answer may or may not have. A
// restock sets the stock and starts a round. A final reading of the database must
// match the state the history leads to, and so must every reading taken
// between ops.
//
// A product's history is checked in windows where that is sound: a
// reading of the database taken while none of the product's ops was in
// flight (each had its answer, and none may still take effect later) is
// the state every order of the ops before it reaches, so the ops after it
// are checked from it on their own. Each window's check is bounded by a
// Budget that grows with its ops; a window that runs out of it is
// Inconclusive, which is never a pass.
package history

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Outcome is what a request's answer says happened.
type Outcome int

const (
	// Sold: the sale is done (2xx); for a restock, it was applied.
	Sold Outcome = iota
	// SoldOut: too few units (409 sold-out).
	SoldOut
	// Failed: a definite failure; nothing was sold or restocked (4xx, 503
	// other than outcome-unknown).
	Failed
	// Unknown: the request may or may not have taken effect (outcome-unknown,
	// a timeout, a lost connection).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Sold:
		return "sold"
	case SoldOut:
		return "sold out"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Kind is the kind of request.
type Kind int

const (
	// Sale: POST /sale, quantity = units wanted.
	Sale Kind = iota
	// Restock: PUT /products/{id}, quantity = the new stock.
	Restock
	// Read: the database's stock, quantity = the stock read, Round the
	// round read, taken between Start and End. Check adds the final one;
	// a caller adds those it took between ops.
	Read
	// Return: an order's units come back to the stock (a cancel, a refund
	// or the expiry job), quantity = the units, Round the order's round: in
	// that round the stock rises by quantity; in any other (a restock came
	// between the hold and the return) nothing changes, as Postgres gives
	// an old round's units nothing in the new one. Sold: it happened
	// somewhere between Start and End (a 200 cancel, or an expiry between
	// the order's deadline and when it was seen expired); Unknown: it may
	// or may not have, up to the last reading; Failed: it did not.
	Return
)

// Op is one request and its answer.
type Op struct {
	Client   int // who sent it: a buyer's number; ops of one client do not overlap
	Product  string
	Kind     Kind
	Quantity int64
	Outcome  Outcome
	// Remaining is the stock a Sold answer reported right after the sale
	// (-1 when it did not say, or when the answer replays an earlier sale
	// and reports the stock of now), and Round the round it reported (of a
	// sale or a restock; 0 when it did not say).
	Remaining int64
	Round     int
	// Start is when the request was sent, End when its answer came.
	Start, End time.Time
	// Key is the Idempotency-Key a sale was sent with ("" for none): what
	// finds its row in the ledger when its answer did not say.
	Key string
	// Late says the op may have taken effect after its answer came, up to
	// the last reading: a sale whose answer did not say (a timeout, a
	// 5xx) but which the ledger shows sold. An Unknown op is always late.
	Late bool
}

// lingers reports whether op may take effect after End.
func (op Op) lingers() bool { return op.Late || op.Outcome == Unknown }

// Recorder collects ops from many goroutines.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Add records op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of what was recorded, in the order it was added.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// State is a product's stock and round.
type State struct {
	Stock int64
	Round int
}

// Verdict is the result of checking one product, or a whole history.
type Verdict string

const (
	// Linearizable: an order of events explains every answer.
	Linearizable Verdict = "LINEARIZABLE"
	// NotLinearizable: no order of events explains the answers.
	NotLinearizable Verdict = "NOT LINEARIZABLE"
	// Inconclusive: the check ran out of time; never a pass.
	Inconclusive Verdict = "INCONCLUSIVE"
)

// ProductResult is the check of one product's history.
type ProductResult struct {
	Product string
	Verdict Verdict
	// Ops is how many ops were checked (definite failures, which constrain
	// nothing, are left out).
	Ops int
	// Violation names what no order explains, for a NotLinearizable
	// product: "false sold-out" (sold out while stock remained), "phantom
	// sale" (sold what no stock could give), "wrong remaining" (two sales of
	// a round told the same stock left), "final stock" (the database's
	// stock is not where the answers lead), "restock", "return" or
	// "unexplained".
	Violation string
	// Evidence is the first op no order could place, described.
	Evidence string
	// Took is how long the check ran; Windows how many windows it was
	// checked in (see the package doc), Budget the largest window's
	// budget.
	Took    time.Duration
	Windows int
	Budget  time.Duration

	viz func(path string) error
}

// WriteHTML writes porcupine's visualization of this product's history: the
// longest orders found and, for a product that fails, where they break.
func (p ProductResult) WriteHTML(path string) error {
	if p.viz == nil {
		return fmt.Errorf("history of %q: nothing to visualize", p.Product)
	}
	return p.viz(path)
}

// Result is the check of a whole history.
type Result struct {
	Verdict  Verdict
	Products []ProductResult // sorted by product
}

// Failed returns the products whose verdict is not Linearizable.
func (r Result) Failed() []ProductResult {
	var out []ProductResult
	for _, p := range r.Products {
		if p.Verdict != Linearizable {
			out = append(out, p)
		}
	}
	return out
}

// Budget is how long the check of a window of n ops may run before it is
// Inconclusive; 0 for no bound.
type Budget func(n int) time.Duration

// Within is the budget d for every window, whatever its size (0: no bound).
func Within(d time.Duration) Budget { return func(int) time.Duration { return d } }

// Scaled is the budget base plus perOp for each op of the window.
func Scaled(base, perOp time.Duration) Budget {
	return func(n int) time.Duration { return base + time.Duration(n)*perOp }
}

// Check checks ops product by product. initial is each product's state
// before the first op, final its state read from the database after the
// last op has returned (a product missing from final is not read); ops
// may hold readings taken between ops too (Kind Read). Each window of a
// product's history (see the package doc) is checked within budget(its
// ops) (nil: no bound), and is Inconclusive past it. The whole Result is
// NotLinearizable if any product is, else Inconclusive if any product is,
// else Linearizable.
func Check(initial, final map[string]State, ops []Op, budget Budget) Result {
	byProduct := map[string][]Op{}
	for _, op := range ops {
		if (op.Kind == Sale || op.Kind == Return) && op.Outcome == Failed {
			continue // no effect, no constraint
		}
		byProduct[op.Product] = append(byProduct[op.Product], op)
	}
	for id := range final {
		if _, ok := byProduct[id]; !ok {
			byProduct[id] = nil
		}
	}
	products := make([]string, 0, len(byProduct))
	for id := range byProduct {
		products = append(products, id)
	}
	sort.Strings(products)

	res := Result{Verdict: Linearizable}
	for _, id := range products {
		pr := checkWindows(id, initial[id], final, byProduct[id], budget)
		switch {
		case pr.Verdict == NotLinearizable:
			res.Verdict = NotLinearizable
		case pr.Verdict == Inconclusive && res.Verdict == Linearizable:
			res.Verdict = Inconclusive
		}
		res.Products = append(res.Products, pr)
	}
	return res
}
