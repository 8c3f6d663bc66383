package verdict

import "fmt"

// Figures is what one product of a run measured: the answers its buyers
// got, and its state read back afterwards (from Postgres, or through the
// API), round by round.
//
// In a faulted run (Evidence.Fault set) an answer that is not definite (a
// 503 or another 5xx, or none: a killed replica, Postgres restarting) is a
// figure, not a failure; any such buyer may or may not have a ledger row;
// and a 409 while stock remained is left to the history check and to
// SoldOutAfterHeal. Oversell, lost updates and 2xx without their row still
// break.
type Figures struct {
	Product     string
	Buyers      int64 // buyers fired, each for one unit
	OK          int64 // 2xx answers
	SoldOut     int64 // 409 answers
	Unavailable int64 // 503 answers, Unknown included
	Errors      int64 // any other status, or no answer
	// Unknown is the 503s of type outcome-unknown: the service could not
	// tell whether the sale committed, so each may or may not have a
	// ledger row.
	Unknown int64
	// Breaches is the 409 and 503 answers flagged lock_breach: the lock
	// broke and the database refused the write. Not an invariant broken:
	// the database is what keeps them.
	Breaches int64
	Final    int64 // stock quantity afterwards, in the current round
	// LateSoldOut and LateTurnedAway are the 409s, and the 409s, 503s and
	// errors, of buyers who asked after the run's last restock (every buyer
	// when the run did not restock): only they could see the current
	// round's stock.
	LateSoldOut, LateTurnedAway int64
	// LowestRemaining is the lowest stock a 2xx answer reported left
	// (replays aside); nil when none reported one. Below 0 it proves an
	// oversell at that moment, even when returned units later brought the
	// ledger back under the initial stock.
	LowestRemaining *int64
	// Unattributed is 2xx answers that named no round of this run.
	Unattributed int64
	// Rounds is every round the run sold in, oldest first, exactly one of
	// them current.
	Rounds []RoundFigures
}

// RoundFigures is one round of the ledger as the server reports it, and
// the 2xx answers that named it.
type RoundFigures struct {
	Round   int64
	Current bool
	Initial int64 // the round's stock when it started
	Units   int64 // units in the ledger for this round, less Returned
	Rows    int64 // ledger rows for this round
	// Returned is the units of the round's cancelled, expired and refunded
	// orders that went back to its stock (returns rows, restored).
	Returned int64
	OK       int64 // 2xx answers whose response named this round
}

// RoundResult is one round checked on its own, as --json writes it.
type RoundResult struct {
	Round       int64 `json:"round"`
	Current     bool  `json:"current"`
	Initial     int64 `json:"initial"`
	LedgerUnits int64 `json:"ledger_units"`
	LedgerRows  int64 `json:"ledger_rows"`
	OK          int64 `json:"ok_2xx"` // 2xx answers that named this round
	Oversold    int64 `json:"oversold"`
	Broken      bool  `json:"broken"`
}

// Judgement is the verdict with the derived counts and why.
type Judgement struct {
	Verdict string
	// Oversold is units sold beyond the initial stock, summed over rounds:
	// Σ max(0, ledger − initial).
	Oversold int64
	// LostUpdates is units the ledger records but the stock never lost, in
	// the current round: ledger − (initial − final). Negative means stock
	// fell without a sale.
	LostUpdates int64
	// Undersold is units left in stock while buyers were turned away.
	Undersold int64
	// Rounds is every round with its own oversold count and whether it
	// broke an invariant.
	Rounds []RoundResult
	// Reasons explain any verdict other than SAFE.
	Reasons []string
	// Products is each product's own judgement of its figures (ledger
	// invariants only), in Evidence.Products' order.
	Products []Judgement
}

// BrokenRounds lists the rounds that broke an invariant.
func (j Judgement) BrokenRounds() []int64 {
	var out []int64
	for _, r := range j.Rounds {
		if r.Broken {
			out = append(out, r.Round)
		}
	}
	return out
}

// judgeProduct applies the invariants from design.md to one product of a
// run, each round on its own: quantity ≥ 0; per round ledger ≤ initial; in
// the current round initial − quantity = ledger units; 2xx ≤ ledger rows ≤
// 2xx + unknown, per round and over the run; sold out exactly.
func judgeProduct(f Figures, safe, faulted bool) Judgement {
	var j Judgement
	var broken []string
	multi := len(f.Rounds) > 1
	var current *RoundFigures
	var okSum, rowSum int64
	for i := range f.Rounds {
		r := &f.Rounds[i]
		okSum += r.OK
		rowSum += r.Rows
		rr := RoundResult{Round: r.Round, Current: r.Current, Initial: r.Initial, LedgerUnits: r.Units, LedgerRows: r.Rows, OK: r.OK,
			Oversold: max(0, r.Units-r.Initial)}
		prefix := ""
		if multi {
			prefix = fmt.Sprintf("round %d: ", r.Round)
		}
		var why []string
		if r.Current {
			current = r
			if f.Final < 0 {
				why = append(why, fmt.Sprintf("stock went negative (%d)", f.Final))
			}
		}
		if rr.Oversold > 0 {
			why = append(why, fmt.Sprintf("oversold %d unit%s: ledger %d > initial %d", rr.Oversold, plural(int(rr.Oversold), "", "s"), r.Units, r.Initial))
		} else if r.Current && r.Returned > 0 && f.LowestRemaining != nil && *f.LowestRemaining < 0 {
			// Returned units can bring the ledger back under the initial
			// stock after an oversell: the answers still show it.
			rr.Oversold = -*f.LowestRemaining
			why = append(why, fmt.Sprintf("oversold %d unit%s: a sale answered %d left, though %d returned units brought the ledger back to %d of %d",
				rr.Oversold, plural(int(rr.Oversold), "", "s"), *f.LowestRemaining, r.Returned, r.Units, r.Initial))
		}
		if r.Current {
			if lost := r.Units - (r.Initial - f.Final); lost != 0 {
				j.LostUpdates = lost
				why = append(why, fmt.Sprintf("lost updates: ledger %d units but stock fell by %d", r.Units, r.Initial-f.Final))
			}
		}
		if why1 := Reconcile(r.Rows, r.OK, f.slack(faulted)); why1 != "" {
			why = append(why, why1)
		}
		if r.Units+r.Returned != r.Rows {
			why = append(why, fmt.Sprintf("ledger has %d units in %d sales of one unit each", r.Units+r.Returned, r.Rows))
		}
		for _, w := range why {
			broken = append(broken, prefix+w)
		}
		rr.Broken = len(why) > 0
		j.Oversold += rr.Oversold
		j.Rounds = append(j.Rounds, rr)
	}
	if current == nil {
		broken = append(broken, "no current round to check the final stock against")
	}
	if multi {
		if why := Reconcile(rowSum, okSum, f.slack(faulted)); why != "" {
			broken = append(broken, "over the run: "+why)
		}
	}
	if f.Unattributed > 0 {
		broken = append(broken, fmt.Sprintf("%d buyer%s got 2xx naming no round this run sold in", f.Unattributed, plural(int(f.Unattributed), "", "s")))
	}
	returned := current != nil && current.Returned > 0
	if f.Final > 0 {
		turnedAway := f.LateTurnedAway
		if returned {
			turnedAway -= f.LateSoldOut // true when answered, the units came back later
		}
		j.Undersold = min(f.Final, turnedAway)
	}
	// Units returned after a sold-out (an expiry, a cancel) make it true
	// at its moment and the stock above 0 afterwards: the history check
	// judges those.
	if f.LateSoldOut > 0 && f.Final > 0 && !faulted && !returned {
		broken = append(broken, fmt.Sprintf("answered 409 sold out %d times while %d units remained", f.LateSoldOut, f.Final))
	}
	if f.Errors > 0 && !faulted {
		broken = append(broken, fmt.Sprintf("%d requests failed with neither 2xx, 409 nor 503", f.Errors))
	}

	if !safe {
		switch {
		case j.Oversold > 0:
			j.Verdict = Oversold
		case j.LostUpdates > 0:
			j.Verdict = LostUpdates
		default:
			j.Verdict = NoOversell
		}
		j.Reasons = broken
		return j
	}
	switch {
	case len(broken) > 0:
		j.Verdict, j.Reasons = Broken, broken
	case j.Undersold > 0:
		j.Verdict = Undersold
		j.Reasons = []string{fmt.Sprintf("%d units left while %d buyers got 503 (lock wait timed out): a capacity limit, not oversell", f.Final, f.Unavailable)}
	default:
		j.Verdict = Safe
	}
	return j
}

// slack is how many ledger rows may lack a 2xx: the buyers whose answer
// did not say whether they bought.
func (f Figures) slack(faulted bool) int64 {
	if faulted {
		return f.Unavailable + f.Errors
	}
	return f.Unknown
}

// Reconcile checks ledger rows against the 2xx answers: every 2xx has its
// row, and a row without a 2xx can only belong to a buyer whose outcome was
// unknown. It returns what is wrong, or "".
func Reconcile(rows, ok, unknown int64) string {
	switch {
	case rows < ok:
		return fmt.Sprintf("ledger has %d sales but %d buyers got 2xx", rows, ok)
	case rows > ok+unknown && unknown == 0:
		return fmt.Sprintf("ledger has %d sales but %d buyers got 2xx", rows, ok)
	case rows > ok+unknown:
		return fmt.Sprintf("ledger has %d sales but %d buyers got 2xx and %d got outcome-unknown", rows, ok, unknown)
	}
	return ""
}

// MaxProductReasons bounds how many products' reasons a row lists.
const MaxProductReasons = 8

// combine is the verdict of a many-product row from its products' own
// judgements: a safe row is BROKEN when any product is, UNDERSOLD when any
// product is and none broke, else SAFE; an unsafe row is OVERSOLD when any
// product oversold, LOST UPDATES when any lost one. Reasons name their
// product, at most MaxProductReasons products of them.
func combine(safe bool, ids []string, js []Judgement) (string, []string) {
	var verdict string
	var reasons []string
	listed, more := 0, 0
	add := func(i int) {
		if len(js[i].Reasons) == 0 {
			return
		}
		if listed == MaxProductReasons {
			more++
			return
		}
		listed++
		for _, r := range js[i].Reasons {
			reasons = append(reasons, ids[i]+": "+r)
		}
	}
	some := func(v string) bool {
		for _, j := range js {
			if j.Verdict == v {
				return true
			}
		}
		return false
	}
	switch {
	case safe && some(Broken):
		verdict = Broken
		for i := range js {
			if js[i].Verdict == Broken {
				add(i)
			}
		}
	case safe && some(Undersold):
		verdict = Undersold
		for i := range js {
			add(i)
		}
	case safe:
		verdict = Safe
	default:
		switch {
		case some(Oversold):
			verdict = Oversold
		case some(LostUpdates):
			verdict = LostUpdates
		default:
			verdict = NoOversell
		}
		for i := range js {
			add(i)
		}
	}
	if more > 0 {
		reasons = append(reasons, fmt.Sprintf("… and %d more product%s", more, plural(more, "", "s")))
	}
	return verdict, reasons
}
