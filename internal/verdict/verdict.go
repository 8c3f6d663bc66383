package verdict

import (
	"fmt"
	"time"

	"inventory/internal/history"
)

// Verdicts, one per row (a strategy, mix or switch) and run. A row sold
// only by safe strategies is judged as a safe strategy.
const (
	// Safe: a safe strategy sold exactly what it had, no more, the ledger
	// matches the answers and the stock in every round of the run, and one
	// order of events explains every answer (a checked history). Lock
	// breaches the database caught do not change that.
	Safe = "SAFE"
	// Undersold: a safe strategy kept every invariant but turned
	// buyers away with 503 (lock wait timed out) while stock remained. Not
	// a correctness failure, a capacity one: raise INVENTORY_LOCK_WAIT or
	// lower --concurrency. Under a fault, the wave of buyers after the heal
	// must still sell (else Stuck).
	Undersold = "UNDERSOLD"
	// Broken: a safe strategy oversold (in any round), lost an
	// update, disagreed with its ledger beyond what outcome-unknown answers
	// allow, answered "sold out" with stock left, failed requests it
	// should have answered, sold twice for one Idempotency-Key, sold with
	// another strategy than the fleet default it was given, or tripped the
	// invariant watchdog's circuit. The load tester exits 1.
	Broken = "BROKEN"
	// Oversold: an unsafe strategy sold more than it had, which is
	// what the demo is meant to show.
	Oversold = "OVERSOLD"
	// LostUpdates: an unsafe strategy recorded more sales than its
	// stock went down by, without overselling this run.
	LostUpdates = "LOST UPDATES"
	// NoOversell: an unsafe strategy happened not to oversell this
	// run. It is still unsafe; the race simply did not hit.
	NoOversell = "NO OVERSELL"
	// NotLinearizable: a safe strategy's answers cannot all be true: no
	// order of its sales and restocks explains every answer buyers got (a
	// sold-out while stock remained, a sale the stock never saw, a final
	// stock the answers do not lead to). Checked on the history of answers
	// (internal/history); the load tester exits 1.
	NotLinearizable = "NOT LINEARIZABLE"
	// Inconclusive: a safe strategy kept the ledger's invariants, but its
	// history of answers was not checked to the end (the checker ran out
	// of time, or nobody checked it): a false sold-out in a run that sold
	// out would only show there, so the run cannot pass. The load tester
	// exits 1.
	Inconclusive = "INCONCLUSIVE"
	// Stuck: under a fault, a safe strategy sold nothing to the wave of
	// buyers sent once the fault had healed, while units remained (or the
	// wave was not answered in time, or none was sent): it did not recover.
	// Also: a held order had not ended (paid, cancelled or expired) when
	// its deadline and the expiry job's bound had passed. Fails its run
	// and its cell.
	Stuck = "STUCK"
	// NotStruck: a cell of the fault matrix whose fault, declared to apply
	// to the strategy, did not strike enough of its runs, said at run time
	// that it did not apply, or never showed the effect it declares: the
	// cell proved nothing, and fails, safe strategy or not.
	NotStruck = "DID NOT STRIKE"
)

// Evidence is everything one run of a row left to judge it by: the
// answers its buyers got and the state of each product before and after,
// read from Postgres (or through the API), the history check of the
// answers, and, where the run had them, the ledger's rows, the circuits the
// watchdog opened, the fault's strike and the wave of buyers after its
// heal. Collecting it is load's and the fault matrix's job; judging it is
// Judge's alone.
type Evidence struct {
	// Safe: every strategy the row sells with claims to be safe.
	Safe bool
	// Products is each product's figures, in the run's order.
	Products []Figures
	// History is the check of every answer against one sequential stock
	// per product; nil when none was made.
	History *history.Result
	// Ledger is the ledger's rows of a one-product run (every round of the
	// run), read from Postgres; nil when not read. With Answers, each
	// buyer's Idempotency-Key is held against it (CheckKeys).
	Ledger  []LedgerRow
	Answers []KeyedAnswer
	// SoldWith is the fleet default the buyers, naming no strategy, must
	// all have been sold with ("" when they named theirs, or a fault
	// switched it on purpose); needs Ledger.
	SoldWith string
	// Circuits is the circuits the invariant watchdog opened on the run's
	// products, in any of the run's rounds, read from Postgres;
	// CircuitRefusals the buyers told 503 circuit-open (seen whether the
	// database is known or not).
	Circuits        []Circuit
	CircuitRefusals int64
	// Fault is the fault that struck during the run; nil for none.
	Fault *Strike
	// Wave is the buyers sent once the fault had healed; nil for none.
	Wave *Wave
	// Orders is the run's orders and their rounds, read from Postgres once
	// every held order had ended; nil for a run without holds.
	Orders *Orders
}

// Strike is what a faulted run knows of its fault.
type Strike struct {
	Fault string
	// Healed is when the fault, having struck, was healed.
	Healed time.Time
	// SoldOutSent is when each of the run's sales answered 409 sold out
	// was sent (SoldOutAfterHeal); nil when not noted.
	SoldOutSent []time.Time
}

// Wave is the liveness check after a fault: once it has healed, a fresh
// wave of buyers (restocked first if the run had sold out) buys what is
// left, within a bound.
type Wave struct {
	Within time.Duration // the bound
	// Left is the units of the current round as the wave began.
	Left int64
	// RestockedAt is when the restock before the wave was answered; zero
	// when the run had left units and the wave bought those. Began is
	// when the wave's first buyer was sent.
	RestockedAt time.Time
	Began       time.Time
	Buyers      int64 // buyers sent
	Sold        int64 // their 2xx
	// Unanswered is the wave's buyers still without an answer when the
	// bound ran out (cut off in flight, or never sent).
	Unanswered int64
}

// Circuit is a product's sale circuit as the invariant watchdog opened it
// (table circuits): the evidence it saw, the round's stock and ledger at
// its check, is how far a strategy had oversold when the breaker tripped.
type Circuit struct {
	Product  string    `json:"product"`
	Round    int64     `json:"round"`
	Kind     string    `json:"kind"` // negative_stock, ledger_mismatch
	Quantity int64     `json:"quantity"`
	Initial  int64     `json:"initial"`
	Sold     int64     `json:"sold"`
	Open     bool      `json:"open"` // still open after the run
	OpenedAt time.Time `json:"opened_at"`
	OpenedBy string    `json:"opened_by"`
}

// OversoldAtTrip is the units sold beyond the stock when the breaker tripped.
func (c Circuit) OversoldAtTrip() int64 { return max(0, c.Sold-c.Initial, -c.Quantity) }

// Judge is the verdict of one run from its evidence, and why. A safe row
// is, in this order of precedence: BROKEN when a product broke a ledger
// invariant, a key's rows disagree with its buyer's answer, a sale was made
// with another strategy than the default given, the watchdog opened a
// circuit, or a sold-out was answered after the fault had healed while
// units remained; ORDERS BROKEN when its orders broke an invariant of an
// order's life (Orders.Check); NOT LINEARIZABLE when no order of events
// explains the answers; STUCK when, under a fault, the wave after the heal
// sold nothing of what was left (or was not answered in time, or not
// sent), or a held order never ended;
// INCONCLUSIVE when its history was not checked to the end; UNDERSOLD when
// buyers were turned away while units remained; else SAFE. Every reason
// found is listed, whichever verdict wins. An unsafe row is OVERSOLD, LOST
// UPDATES or NO OVERSELL by its ledger, with the same reasons listed.
func Judge(e Evidence) Judgement {
	faulted := e.Fault != nil
	js := make([]Judgement, len(e.Products))
	ids := make([]string, len(e.Products))
	for i, f := range e.Products {
		js[i], ids[i] = judgeProduct(f, e.Safe, faulted), f.Product
	}
	var j Judgement
	switch len(js) {
	case 0:
		j = Judgement{Verdict: Broken, Reasons: []string{"no product was read back: nothing to judge"}}
		if !e.Safe {
			j.Verdict = NoOversell
		}
	case 1:
		j = js[0]
		j.Reasons = append([]string(nil), j.Reasons...)
	default:
		j.Verdict, j.Reasons = combine(e.Safe, ids, js)
		for _, p := range js {
			j.Oversold += p.Oversold
			j.LostUpdates += p.LostUpdates
			j.Undersold += p.Undersold
		}
	}
	j.Products = js

	broken := e.brokenBeyondTheLedger()
	notLin, unchecked := e.history()
	stuck := e.stuck()
	var ordersBroken []string
	if e.Orders != nil {
		var unended []string
		ordersBroken, unended = e.Orders.Check()
		stuck = append(stuck, unended...)
	}
	if !e.Safe {
		j.Reasons = append(j.Reasons, broken...)
		j.Reasons = append(j.Reasons, ordersBroken...)
		j.Reasons = append(j.Reasons, notLin...)
		return j
	}
	ledgerBroken := j.Verdict == Broken
	var capacity []string // an UNDERSOLD row's note: listed after what fails
	if j.Verdict == Undersold {
		capacity, j.Reasons = j.Reasons, nil
	}
	j.Reasons = append(j.Reasons, broken...)
	j.Reasons = append(j.Reasons, ordersBroken...)
	j.Reasons = append(j.Reasons, notLin...)
	j.Reasons = append(j.Reasons, stuck...)
	j.Reasons = append(j.Reasons, unchecked...)
	switch {
	case ledgerBroken || len(broken) > 0:
		j.Verdict = Broken
		if e.Ledger != nil {
			// Which strategy sold what, from which replica: the first clue.
			j.Reasons = append(j.Reasons, "ledger rows by strategy@replica: "+byStrategy(e.Ledger))
		}
	case len(ordersBroken) > 0:
		j.Verdict = OrdersBroken
	case len(notLin) > 0:
		j.Verdict = NotLinearizable
	case len(stuck) > 0:
		j.Verdict = Stuck
	case len(unchecked) > 0:
		j.Verdict = Inconclusive
	case len(capacity) > 0:
		j.Verdict = Undersold
	default:
		j.Verdict = Safe
	}
	j.Reasons = append(j.Reasons, capacity...)
	return j
}

// brokenBeyondTheLedger is what breaks a safe row besides the products'
// ledger invariants: keys, the strategy sales were made with, circuits and
// sold-outs after the heal.
func (e Evidence) brokenBeyondTheLedger() []string {
	var why []string
	if e.Ledger != nil && e.Answers != nil {
		why = append(why, CheckKeys(e.Ledger, e.Answers)...)
	}
	if e.Ledger != nil && e.SoldWith != "" {
		why = append(why, soldWithOthers(e.Ledger, e.SoldWith)...)
	}
	if e.Safe {
		// A safe strategy never trips the breaker, fault or not: an open
		// circuit is the watchdog seeing a broken invariant (or misreading
		// a sound one), and the product's sales stopped either way.
		for _, c := range e.Circuits {
			why = append(why, fmt.Sprintf("the watchdog of %s opened %s's circuit in round %d (%s: stock %d, %d sold of %d): a safe strategy must never trip it",
				c.OpenedBy, c.Product, c.Round, c.Kind, c.Quantity, c.Sold, c.Initial))
		}
		if e.CircuitRefusals > 0 {
			why = append(why, fmt.Sprintf("%d buyer%s refused with 503 circuit-open: the invariant watchdog stopped the product's sales",
				e.CircuitRefusals, plural(int(e.CircuitRefusals), " was", "s were")))
		}
	}
	if e.Safe && e.Fault != nil && !e.Fault.Healed.IsZero() && len(e.Products) == 1 {
		why = append(why, e.soldOutAfterHeal()...)
	}
	return why
}

// soldOutAfterHeal is SoldOutAfterHeal over a faulted run and its wave:
// stock only falls within a round, so a 409 sent once the fault had healed
// is false when units were still left later in its round. Those sent
// before the wave are held against what the wave found left (unless it
// found none and restocked: the run's round had sold out); those sent
// during the wave, against the stock after it.
func (e Evidence) soldOutAfterHeal() []string {
	healed, final, sent := e.Fault.Healed, e.Products[0].Final, e.Fault.SoldOutSent
	w := e.Wave
	if w == nil {
		if _, _, why := SoldOutAfterHeal(final, healed, sent); why != "" {
			return []string{why}
		}
		return nil
	}
	var before, during []time.Time
	for _, t := range sent {
		if t.Before(w.Began) {
			before = append(before, t)
		} else {
			during = append(during, t)
		}
	}
	var out []string
	if w.RestockedAt.IsZero() {
		if _, _, why := SoldOutAfterHeal(w.Left, healed, before); why != "" {
			out = append(out, why+", before the wave after the heal")
		}
	}
	if _, _, why := SoldOutAfterHeal(final, healed, during); why != "" {
		out = append(out, why+", to the wave after the heal")
	}
	return out
}

// history is the history check's reasons: the products no order explains
// (notLin), and those whose check did not finish, or the check that was
// never made (unchecked).
func (e Evidence) history() (notLin, unchecked []string) {
	h := e.History
	if h == nil {
		return nil, []string{"the history of answers was not checked: no order of events was shown to explain them"}
	}
	listed := 0
	for _, p := range h.Products {
		if p.Verdict == history.Linearizable {
			continue
		}
		if listed == MaxProductReasons {
			notLin = append(notLin, "… and more products whose history is not LINEARIZABLE")
			break
		}
		listed++
		switch p.Verdict {
		case history.NotLinearizable:
			notLin = append(notLin, fmt.Sprintf("history of %s not linearizable (%s): %s", p.Product, p.Violation, p.Evidence))
		default:
			unchecked = append(unchecked, fmt.Sprintf("history of %s %s after %s (%d ops): %s; not checked, so not a pass",
				p.Product, p.Verdict, p.Took.Round(time.Millisecond), p.Ops, p.Evidence))
		}
	}
	if h.Verdict == history.Inconclusive && len(unchecked) == 0 && len(notLin) == 0 {
		unchecked = append(unchecked, "the history check was INCONCLUSIVE")
	}
	return notLin, unchecked
}

// stuck is why a faulted safe run did not show that it sells again once the
// fault healed.
func (e Evidence) stuck() []string {
	if e.Fault == nil || !e.Safe {
		return nil
	}
	w := e.Wave
	switch {
	case w == nil:
		return []string{"no buyers were sent once the fault had healed: that the strategy sells again went unchecked"}
	case w.Left <= 0:
		return []string{"nothing was left to sell once the fault had healed, and no restock: that the strategy sells again went unchecked"}
	case w.Sold == 0:
		return []string{fmt.Sprintf("sold none of the %d unit%s left once the fault had healed, to a wave of %d buyers", w.Left, plural(int(w.Left), "", "s"), w.Buyers)}
	case w.Unanswered > 0:
		return []string{fmt.Sprintf("%d of the %d buyers sent once the fault had healed had no answer within %s (%d of %d units sold)",
			w.Unanswered, w.Buyers, w.Within, w.Sold, w.Left)}
	}
	return nil
}

// Kept reports whether a run whose row is safe (or not), judged verdict
// for reasons, kept every invariant: a safe row SAFE or UNDERSOLD, an
// unsafe one with nothing to explain.
func Kept(safe bool, verdict string, reasons []string) bool {
	if safe {
		return verdict == Safe || verdict == Undersold
	}
	return len(reasons) == 0
}

// Failing reports whether a verdict makes the load tester exit non-zero.
func Failing(verdict string) bool {
	switch verdict {
	case Broken, OrdersBroken, NotLinearizable, Inconclusive, Stuck, NotStruck:
		return true
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
