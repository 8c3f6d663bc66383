package main

import "fmt"

// Verdicts, one per strategy and run.
const (
	// VerdictSafe: a safe strategy sold exactly what it had, no more, and
	// the ledger matches the answers and the stock.
	VerdictSafe = "SAFE"
	// VerdictUndersold: a safe strategy kept every invariant but turned
	// buyers away with 503 (lock wait timed out) while stock remained. Not
	// a correctness failure, a capacity one: raise INVENTORY_LOCK_WAIT or
	// lower --concurrency.
	VerdictUndersold = "UNDERSOLD"
	// VerdictBroken: a safe strategy oversold, lost an update, disagreed
	// with its ledger, answered "sold out" with stock left, or failed
	// requests it should have answered. The load tester exits 1.
	VerdictBroken = "BROKEN"
	// VerdictOversold: an unsafe strategy sold more than it had, which is
	// what the demo is meant to show.
	VerdictOversold = "OVERSOLD"
	// VerdictLostUpdates: an unsafe strategy recorded more sales than its
	// stock went down by, without overselling this run.
	VerdictLostUpdates = "LOST UPDATES"
	// VerdictNoOversell: an unsafe strategy happened not to oversell this
	// run. It is still unsafe; the race simply did not hit.
	VerdictNoOversell = "NO OVERSELL"
)

// figures is what one strategy run measured: the answers buyers got, and
// the product's state read back afterwards (from Postgres, via the API).
type figures struct {
	Safe        bool  // the strategy claims to be safe with several replicas
	Initial     int64 // units in stock after the restock
	Buyers      int64 // buyers fired, each for one unit
	OK          int64 // 2xx answers
	SoldOut     int64 // 409 answers
	Unavailable int64 // 503 answers
	Errors      int64 // any other status, or no answer
	Final       int64 // stock quantity afterwards
	LedgerUnits int64 // units sold per the ledger (current round)
	LedgerRows  int64 // sales rows in the ledger (current round)
}

// judgement is the verdict with the derived counts and why.
type judgement struct {
	Verdict string
	// Oversold is units sold beyond the initial stock: max(0, ledger − initial).
	Oversold int64
	// LostUpdates is units the ledger records but the stock never lost:
	// ledger − (initial − final). Negative means stock fell without a sale.
	LostUpdates int64
	// Undersold is units left in stock while buyers were turned away.
	Undersold int64
	// Reasons explain any verdict other than SAFE.
	Reasons []string
}

// judge applies the invariants from design.md to one run.
func judge(f figures) judgement {
	j := judgement{
		Oversold:    max(0, f.LedgerUnits-f.Initial),
		LostUpdates: f.LedgerUnits - (f.Initial - f.Final),
	}
	turnedAway := f.SoldOut + f.Unavailable + f.Errors
	if f.Final > 0 {
		j.Undersold = min(f.Final, turnedAway)
	}

	var broken []string
	if f.Final < 0 {
		broken = append(broken, fmt.Sprintf("stock went negative (%d)", f.Final))
	}
	if j.Oversold > 0 {
		broken = append(broken, fmt.Sprintf("oversold %d unit%s: ledger %d > initial %d", j.Oversold, plural(int(j.Oversold), "", "s"), f.LedgerUnits, f.Initial))
	}
	if j.LostUpdates != 0 {
		broken = append(broken, fmt.Sprintf("lost updates: ledger %d units but stock fell by %d", f.LedgerUnits, f.Initial-f.Final))
	}
	if f.LedgerRows != f.OK {
		broken = append(broken, fmt.Sprintf("ledger has %d sales but %d buyers got 2xx", f.LedgerRows, f.OK))
	}
	if f.LedgerUnits != f.LedgerRows {
		broken = append(broken, fmt.Sprintf("ledger has %d units in %d sales of one unit each", f.LedgerUnits, f.LedgerRows))
	}
	if f.SoldOut > 0 && f.Final > 0 {
		broken = append(broken, fmt.Sprintf("answered 409 sold out %d times while %d units remained", f.SoldOut, f.Final))
	}
	if f.Errors > 0 {
		broken = append(broken, fmt.Sprintf("%d requests failed with neither 2xx, 409 nor 503", f.Errors))
	}

	if !f.Safe {
		switch {
		case j.Oversold > 0:
			j.Verdict = VerdictOversold
		case j.LostUpdates > 0:
			j.Verdict = VerdictLostUpdates
		default:
			j.Verdict = VerdictNoOversell
		}
		j.Reasons = broken
		return j
	}
	switch {
	case len(broken) > 0:
		j.Verdict, j.Reasons = VerdictBroken, broken
	case j.Undersold > 0:
		j.Verdict = VerdictUndersold
		j.Reasons = []string{fmt.Sprintf("%d units left while %d buyers got 503 (lock wait timed out): a capacity limit, not oversell", f.Final, f.Unavailable)}
	default:
		j.Verdict = VerdictSafe
	}
	return j
}

// failing reports whether a verdict makes the load tester exit non-zero.
func failing(verdict string) bool { return verdict == VerdictBroken }
