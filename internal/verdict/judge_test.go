package verdict

import (
	"slices"
	"strings"
	"testing"
	"time"

	"inventory/internal/history"
)

// checked is a history that one order explains.
func checked(products ...string) *history.Result {
	h := &history.Result{Verdict: history.Linearizable}
	for _, p := range products {
		h.Products = append(h.Products, history.ProductResult{Product: p, Verdict: history.Linearizable, Ops: 10})
	}
	return h
}

// TestJudgeRules: one case per rule of Judge, each from a run that is SAFE
// until the case spoils one piece of its evidence; each case fails if its
// rule is taken out of Judge.
func TestJudgeRules(t *testing.T) {
	healed := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// A faulted run of 10 buyers for 10 units: 6 sold, 4 turned away by
	// 503 while the fault was active, then a wave of 5 buyers after the
	// heal bought the 4 left (one told sold out).
	faulted := func() Evidence {
		return Evidence{
			Safe: true,
			Products: []Figures{{Product: "p", Buyers: 15, OK: 10, SoldOut: 1, Unavailable: 4, Final: 0, LateSoldOut: 1, LateTurnedAway: 5,
				Rounds: []RoundFigures{{Round: 1, Current: true, Initial: 10, Units: 10, Rows: 10, OK: 10}}}},
			History: checked("p"),
			Ledger:  []LedgerRow{{ID: 1, Key: "p-0", Round: 1, Strategy: "redis", Instance: "inventory-1"}},
			Answers: []KeyedAnswer{{Key: "p-0", Definite: true, OK: true, SaleID: 1}},
			Fault:   &Strike{Fault: "replica-kill", Healed: healed, SoldOutSent: []time.Time{healed.Add(3 * time.Second)}},
			Wave:    &Wave{Within: 30 * time.Second, Left: 4, Buyers: 5, Sold: 4, Began: healed.Add(2 * time.Second)},
		}
	}
	// A run without a fault: 15 buyers for 10 units, sold out exactly.
	plain := func() Evidence {
		return Evidence{
			Safe: true,
			Products: []Figures{{Product: "p", Buyers: 15, OK: 10, SoldOut: 5, Final: 0, LateSoldOut: 5, LateTurnedAway: 5,
				Rounds: []RoundFigures{{Round: 1, Current: true, Initial: 10, Units: 10, Rows: 10, OK: 10}}}},
			History: checked("p"),
		}
	}
	for _, tc := range []struct {
		name    string
		e       Evidence
		spoil   func(e *Evidence)
		want    string
		because string // a reason must contain it
	}{
		{"a clean run", plain(), func(*Evidence) {}, Safe, ""},
		{"a clean faulted run, the wave sold what the fault left", faulted(), func(*Evidence) {}, Safe, ""},
		{"a product broke a ledger invariant", plain(), func(e *Evidence) {
			e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows, e.Products[0].OK, e.Products[0].Final = 11, 11, 11, -1
		}, Broken, "oversold 1 unit"},
		{"a key's row disagrees with its answer", faulted(), func(e *Evidence) { e.Answers[0].SaleID = 2 },
			Broken, "key p-0 was told sale 2 but its ledger row is 1"},
		{"a sale made with another strategy than the default", faulted(), func(e *Evidence) { e.SoldWith = "atomic" },
			Broken, "1 sales made with redis while the fleet default was atomic"},
		{"the watchdog opened a circuit", plain(), func(e *Evidence) {
			e.Circuits = []Circuit{{Product: "p", Round: 1, Kind: "negative_stock", OpenedBy: "inventory-1"}}
		}, Broken, "opened p's circuit in round 1"},
		{"buyers refused by an open circuit", plain(), func(e *Evidence) { e.CircuitRefusals = 2 },
			Broken, "2 buyers were refused with 503 circuit-open"},
		{"a sold-out after the heal while units remained", faulted(), func(e *Evidence) {
			e.Products[0].Final, e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows, e.Products[0].OK, e.Products[0].Rounds[0].OK = 1, 9, 9, 9, 9
			e.Wave.Sold = 3
		}, Broken, "answered 409 sold out 1 time after the fault had healed"},
		{"a sold-out after the heal, before the wave, while units remained that the wave then sold", faulted(), func(e *Evidence) {
			e.Fault.SoldOutSent = append(e.Fault.SoldOutSent, healed.Add(time.Second))
		}, Broken, "answered 409 sold out 1 time after the fault had healed, while 4 units remained, before the wave"},
		{"a sold-out after the heal but before the wave's restock", faulted(), func(e *Evidence) {
			// Round 1 sold out during the fault; the wave restocked round 2
			// and its 9 buyers bought 9 of its 10 units.
			p := &e.Products[0]
			p.Buyers, p.OK, p.Final, p.LateSoldOut, p.LateTurnedAway = 20, 19, 1, 0, 0
			p.Rounds = []RoundFigures{{Round: 1, Initial: 10, Units: 10, Rows: 10, OK: 10}, {Round: 2, Current: true, Initial: 10, Units: 9, Rows: 9, OK: 9}}
			e.Wave.Left, e.Wave.Buyers, e.Wave.Sold, e.Wave.RestockedAt = 10, 9, 9, healed.Add(1500*time.Millisecond)
			e.Fault.SoldOutSent = []time.Time{healed.Add(time.Second)}
		}, Safe, ""},
		{"no order of events explains the answers", plain(), func(e *Evidence) {
			e.History.Verdict = history.NotLinearizable
			e.History.Products[0].Verdict, e.History.Products[0].Violation = history.NotLinearizable, "false sold-out"
		}, NotLinearizable, "history of p not linearizable (false sold-out)"},
		{"the history was not checked", plain(), func(e *Evidence) { e.History = nil }, Inconclusive, "was not checked"},
		{"the history check ran out of time", plain(), func(e *Evidence) {
			e.History.Verdict = history.Inconclusive
			e.History.Products[0].Verdict, e.History.Products[0].Evidence = history.Inconclusive, "no order found or ruled out within 30s"
		}, Inconclusive, "history of p INCONCLUSIVE"},
		{"faulted, and no wave after the heal", faulted(), func(e *Evidence) { e.Wave = nil }, Stuck, "went unchecked"},
		{"faulted, and the wave bought none of what was left", faulted(), func(e *Evidence) {
			e.Products[0].Final, e.Products[0].OK, e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows, e.Products[0].Rounds[0].OK = 4, 6, 6, 6, 6
			e.Fault.SoldOutSent, e.Wave.Sold = nil, 0
		}, Stuck, "sold none of the 4 units left"},
		{"faulted, and the wave not answered in time", faulted(), func(e *Evidence) { e.Wave.Unanswered = 1 }, Stuck, "had no answer within 30s"},
		{"faulted, nothing left for the wave", faulted(), func(e *Evidence) { e.Wave.Left = 0 }, Stuck, "nothing was left to sell"},
		{"turned away while units remained, no fault", plain(), func(e *Evidence) {
			e.Products[0].OK, e.Products[0].SoldOut, e.Products[0].Unavailable, e.Products[0].LateSoldOut, e.Products[0].Final = 9, 0, 6, 0, 1
			e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows, e.Products[0].Rounds[0].OK = 9, 9, 9
		}, Undersold, "a capacity limit"},
		{"breaking beats an unexplained history, both said", plain(), func(e *Evidence) {
			e.Circuits = []Circuit{{Product: "p", Round: 1, OpenedBy: "inventory-2"}}
			e.History.Verdict = history.NotLinearizable
			e.History.Products[0].Verdict = history.NotLinearizable
		}, Broken, "history of p not linearizable"},
		{"a broken run names who wrote the ledger", faulted(), func(e *Evidence) { e.Answers[0].OK = false },
			Broken, "ledger rows by strategy@replica: redis@inventory-1 1"},
		{"undersold and unchecked is not a pass", plain(), func(e *Evidence) {
			e.Products[0].OK, e.Products[0].SoldOut, e.Products[0].Unavailable, e.Products[0].LateSoldOut, e.Products[0].Final = 9, 0, 6, 0, 1
			e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows, e.Products[0].Rounds[0].OK = 9, 9, 9
			e.History = nil
		}, Inconclusive, "a capacity limit"},
		{"an unsafe strategy is judged by its oversell, the rest listed", plain(), func(e *Evidence) {
			e.Safe = false
			e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows, e.Products[0].OK, e.Products[0].Final = 12, 12, 12, -2
			e.History.Verdict = history.NotLinearizable
			e.History.Products[0].Verdict = history.NotLinearizable
			e.Wave = nil
		}, Oversold, "history of p not linearizable"},
		{"one of many products broken", plain(), func(e *Evidence) {
			q := e.Products[0]
			q.Product, q.Rounds = "q", []RoundFigures{{Round: 1, Current: true, Initial: 10, Units: 10, Rows: 10, OK: 9}}
			e.Products = append(e.Products, q)
			e.History = checked("p", "q")
		}, Broken, "q: ledger has 10 sales but 9 buyers got 2xx"},
	} {
		e := tc.e
		tc.spoil(&e)
		got := Judge(e)
		if got.Verdict != tc.want {
			t.Errorf("%s: Judge = %s %q, want %s", tc.name, got.Verdict, got.Reasons, tc.want)
			continue
		}
		if tc.because != "" && !slices.ContainsFunc(got.Reasons, func(r string) bool { return strings.Contains(r, tc.because) }) {
			t.Errorf("%s: Judge = %s %q, want a reason saying %q", tc.name, got.Verdict, got.Reasons, tc.because)
		}
		if e.Safe && (got.Verdict == Safe) != (len(got.Reasons) == 0) {
			t.Errorf("%s: Judge = %s with reasons %q: a safe row is SAFE exactly when nothing is to be said", tc.name, got.Verdict, got.Reasons)
		}
		wantFailing := e.Safe && tc.want != Safe && tc.want != Undersold
		if Failing(got.Verdict) != wantFailing {
			t.Errorf("%s: Failing(%s) = %v, want %v", tc.name, got.Verdict, Failing(got.Verdict), wantFailing)
		}
	}
}

// TestJudgeCell: one case per rule of JudgeCell.
func TestJudgeCell(t *testing.T) {
	kept := CellRun{Verdict: Safe}
	for _, tc := range []struct {
		name          string
		c             Cell
		wantNotStruck string // a part of it; "" for none
		wantFails     bool
		wantFailing   string
	}{
		{"every run kept", Cell{Safe: true, Wanted: 3, Runs: []CellRun{kept, kept, kept}}, "", false, ""},
		{"declared n/a before any run", Cell{Safe: true, Wanted: 3, NotApplicable: "takes no lock"}, "", false, ""},
		{"said n/a at run time after declaring it applies", Cell{Safe: true, Wanted: 3, Runs: []CellRun{kept, kept, kept}, Refused: "no other strategy"},
			"said at run time that it does not", true, ""},
		{"fewer runs struck than wanted", Cell{Safe: false, Wanted: 3, Runs: []CellRun{{Verdict: Oversold, Reasons: []string{"x"}}},
			Misses: []string{"try 2: missed", "try 3: missed", "try 4: missed"}, MissedInARow: 3}, "1 of 3 runs struck; the last 3 tries did not: try 2", true, ""},
		{"a lock-breaking fault broke no lock", Cell{Safe: true, Wanted: 2, Runs: []CellRun{kept, kept}, MustBreakLocks: true},
			"no lock was seen broken", true, ""},
		{"a lock-breaking fault broke one, in one run", Cell{Safe: true, Wanted: 2, Runs: []CellRun{kept, {Verdict: Safe, LocksBroken: 1}}, MustBreakLocks: true},
			"", false, ""},
		{"a safe strategy stuck after the heal", Cell{Safe: true, Wanted: 2, Runs: []CellRun{kept, {Verdict: Stuck, Reasons: []string{"sold none"}}}},
			"", true, Stuck},
		{"a safe strategy undersold under the fault", Cell{Safe: true, Wanted: 1, Runs: []CellRun{{Verdict: Undersold, Reasons: []string{"capacity"}}}},
			"", false, ""},
		{"an unsafe strategy broke, as expected", Cell{Safe: false, Wanted: 1, Runs: []CellRun{{Verdict: Oversold, Reasons: []string{"oversold 3"}}}},
			"", false, ""},
	} {
		got := JudgeCell(tc.c)
		if (got.NotStruck != "") != (tc.wantNotStruck != "") || !strings.Contains(got.NotStruck, tc.wantNotStruck) {
			t.Errorf("%s: JudgeCell().NotStruck = %q, want one containing %q", tc.name, got.NotStruck, tc.wantNotStruck)
		}
		if tc.wantNotStruck != "" && !strings.HasPrefix(got.NotStruck, NotStruck) {
			t.Errorf("%s: JudgeCell().NotStruck = %q, want it to start with %s", tc.name, got.NotStruck, NotStruck)
		}
		if got.Fails != tc.wantFails || got.Failing != tc.wantFailing {
			t.Errorf("%s: JudgeCell() fails %v (%q), want %v (%q)", tc.name, got.Fails, got.Failing, tc.wantFails, tc.wantFailing)
		}
	}
}
