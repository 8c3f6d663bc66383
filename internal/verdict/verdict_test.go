package verdict

import (
	"slices"
	"strconv"
	"testing"
)

// oneRound is a run that sold in one round: the current one.
func oneRound(initial, units, rows, ok int64) []RoundFigures {
	return []RoundFigures{{Round: 1, Current: true, Initial: initial, Units: units, Rows: rows, OK: ok}}
}

// run is one product's figures and the row's safety, for judgeProduct.
type run struct {
	Figures
	Safe bool
}

// TestJudgeProduct: the ledger's invariants of one product, round by round.
func TestJudgeProduct(t *testing.T) {
	// 1500 buyers for 1000 units unless a case says otherwise.
	sellOut := run{Safe: true, Figures: Figures{Buyers: 1500, OK: 1000, SoldOut: 500, Final: 0, LateSoldOut: 500, LateTurnedAway: 500, Rounds: oneRound(1000, 1000, 1000, 1000)}}
	tests := []struct {
		name string
		f    func(f *run)
		want Judgement
	}{
		{"safe exact sell-out", func(*run) {}, Judgement{Verdict: Safe}},
		{"safe, fewer buyers than stock", func(f *run) {
			f.Buyers, f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 10, 10, 0, 0, 0, 990, oneRound(1000, 10, 10, 10)
		},
			Judgement{Verdict: Safe}},
		{"safe but 503s left stock", func(f *run) {
			f.OK, f.SoldOut, f.Unavailable, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 990, 0, 510, 0, 510, 10, oneRound(1000, 990, 990, 990)
		},
			Judgement{Verdict: Undersold, Undersold: 10}},
		{"safe strategy oversold, stock negative", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 1003, 497, 497, 497, -3, oneRound(1000, 1003, 1003, 1003)
		},
			Judgement{Verdict: Broken, Oversold: 3}},
		{"safe strategy lost updates", func(f *run) { f.Final, f.Rounds = 4, oneRound(1000, 1000, 1000, 1000) },
			Judgement{Verdict: Broken, LostUpdates: 4, Undersold: 4}},
		{"ledger rows differ from 2xx", func(f *run) { f.OK, f.SoldOut, f.Rounds[0].OK = 999, 501, 999 },
			Judgement{Verdict: Broken}},
		{"2xx without a ledger row", func(f *run) { f.OK, f.Rounds = 1000, oneRound(1000, 999, 999, 1000); f.Final = 1 },
			Judgement{Verdict: Broken, Undersold: 1}},
		{"unexpected errors", func(f *run) { f.SoldOut, f.Errors = 499, 1 },
			Judgement{Verdict: Broken}},
		{"409 while stock remained", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 999, 501, 501, 501, 1, oneRound(1000, 999, 999, 999)
		},
			Judgement{Verdict: Broken, Undersold: 1}},

		// Lock breaches: the lock broke, the database refused the write.
		{"breaches caught, invariants kept", func(f *run) { f.Breaches = 7 }, Judgement{Verdict: Safe}},
		{"breaches as 503 lock-lost, then sold out", func(f *run) {
			f.SoldOut, f.Unavailable, f.Breaches = 495, 5, 5
		},
			Judgement{Verdict: Safe}},
		{"breaches do not excuse an oversell", func(f *run) {
			f.Breaches, f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 3, 1001, 499, 499, 499, -1, oneRound(1000, 1001, 1001, 1001)
		},
			Judgement{Verdict: Broken, Oversold: 1}},

		// Outcome unknown: such a buyer may or may not have a ledger row.
		{"unknown that did sell", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Rounds = 998, 2, 2, 500, 500, 502, oneRound(1000, 1000, 1000, 998)
		},
			Judgement{Verdict: Safe}},
		{"unknown that did not sell", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1000, 2, 2, 498, 498, 500
		},
			Judgement{Verdict: Safe}},
		{"unknown, one sold and one not", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Rounds = 999, 2, 2, 499, 499, 501, oneRound(1000, 1000, 1000, 999)
		},
			Judgement{Verdict: Safe}},
		{"more rows than 2xx + unknown", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Rounds = 997, 3, 2, 500, 500, 503, oneRound(1000, 1000, 1000, 997)
		},
			Judgement{Verdict: Broken}},
		{"unknown does not excuse a 2xx without its row", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 1000, 2, 2, 498, 498, 500, 1, oneRound(1000, 999, 999, 1000)
		},
			Judgement{Verdict: Broken, Undersold: 1}},

		// Several rounds (--restock-during): each checked on its own.
		{"two rounds, both kept", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Buyers, f.Final, f.Rounds = 1500, 500, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 1000},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 500},
			}
		},
			Judgement{Verdict: Safe}},
		{"two rounds, the old one not sold out at the restock", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Final, f.Rounds = 0, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 500, Rows: 500, OK: 500},
				{Round: 5, Current: true, Initial: 1000, Units: 1000, Rows: 1000, OK: 1000},
			}
		},
			Judgement{Verdict: Safe}},
		{"an in-flight sale oversold the old round", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Final, f.Rounds = 499, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 1001, Rows: 1001, OK: 1001},
				{Round: 5, Current: true, Initial: 1000, Units: 501, Rows: 501, OK: 499},
			}
		},
			Judgement{Verdict: Broken, Oversold: 1, Rounds: []RoundResult{{Round: 4, Broken: true, Oversold: 1}, {Round: 5, Current: true, Broken: true}}}},
		{"2xx counted against the wrong round", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Final, f.Rounds = 500, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 1001},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 499},
			}
		},
			Judgement{Verdict: Broken, Rounds: []RoundResult{{Round: 4, Broken: true}, {Round: 5, Current: true, Broken: true}}}},
		{"unknown reconciles across rounds, once", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1498, 2, 2, 0, 0, 0
			f.Final, f.Rounds = 500, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 999},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 499},
			}
		},
			Judgement{Verdict: Safe}},
		{"one unknown cannot stand for a row in each round", func(f *run) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1498, 2, 1, 0, 0, 1
			f.Final, f.Rounds = 500, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 999},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 499},
			}
		},
			Judgement{Verdict: Broken, Undersold: 1}},
		{"409 before the restock is no sign of stock left", func(f *run) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1400, 100, 0, 0
			f.Final, f.Rounds = 600, []RoundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 1000},
				{Round: 5, Current: true, Initial: 1000, Units: 400, Rows: 400, OK: 400},
			}
		},
			Judgement{Verdict: Safe}},
		{"2xx naming no round of the run", func(f *run) { f.OK, f.Unattributed = 1001, 1 },
			Judgement{Verdict: Broken}},

		{"unsafe oversold by going negative", func(f *run) {
			f.Safe, f.OK, f.SoldOut, f.LateSoldOut, f.Final, f.Rounds = false, 1040, 460, 460, -40, oneRound(1000, 1040, 1040, 1040)
		},
			Judgement{Verdict: Oversold, Oversold: 40}},
		{"unsafe oversold by lost updates", func(f *run) {
			f.Safe, f.OK, f.SoldOut, f.LateSoldOut, f.Final, f.Rounds = false, 1200, 300, 300, 0, oneRound(1000, 1200, 1200, 1200)
		},
			Judgement{Verdict: Oversold, Oversold: 200, LostUpdates: 200}},
		{"unsafe lost updates without oversell", func(f *run) {
			f.Safe, f.Buyers, f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = false, 500, 500, 0, 0, 0, 520, oneRound(1000, 500, 500, 500)
		},
			Judgement{Verdict: LostUpdates, LostUpdates: 20}},
		{"unsafe that did not oversell", func(f *run) { f.Safe = false }, Judgement{Verdict: NoOversell}},
	}
	for _, tt := range tests {
		f := sellOut
		f.Rounds = slices.Clone(sellOut.Rounds)
		tt.f(&f)
		got := judgeProduct(f.Figures, f.Safe, false)
		if got.Verdict != tt.want.Verdict || got.Oversold != tt.want.Oversold || got.LostUpdates != tt.want.LostUpdates || got.Undersold != tt.want.Undersold {
			t.Errorf("%s: judgeProduct(%+v) = %s oversold %d lost %d undersold %d (%q), want %s oversold %d lost %d undersold %d",
				tt.name, f, got.Verdict, got.Oversold, got.LostUpdates, got.Undersold, got.Reasons,
				tt.want.Verdict, tt.want.Oversold, tt.want.LostUpdates, tt.want.Undersold)
		}
		if (got.Verdict == Safe) != (len(got.Reasons) == 0) && f.Safe {
			t.Errorf("%s: judgeProduct(%+v) verdict %s with reasons %q: a safe strategy is SAFE exactly when nothing is wrong", tt.name, f, got.Verdict, got.Reasons)
		}
		if len(got.Rounds) != len(f.Rounds) {
			t.Errorf("%s: judgeProduct(%+v) judged %d rounds, want %d", tt.name, f, len(got.Rounds), len(f.Rounds))
			continue
		}
		for i, want := range tt.want.Rounds {
			if g := got.Rounds[i]; g.Round != want.Round || g.Broken != want.Broken || g.Oversold != want.Oversold || g.Current != want.Current {
				t.Errorf("%s: judgeProduct(%+v) round %d = %+v, want round %d broken %v oversold %d current %v (%q)",
					tt.name, f, i, g, want.Round, want.Broken, want.Oversold, want.Current, got.Reasons)
			}
		}
		if len(tt.want.Rounds) > 0 && !slices.Equal(got.BrokenRounds(), brokenOf(tt.want.Rounds)) {
			t.Errorf("%s: BrokenRounds() = %v, want %v", tt.name, got.BrokenRounds(), brokenOf(tt.want.Rounds))
		}
	}
}

func brokenOf(rs []RoundResult) []int64 {
	var out []int64
	for _, r := range rs {
		if r.Broken {
			out = append(out, r.Round)
		}
	}
	return out
}

// TestReconcile pins down the "2xx ≤ rows ≤ 2xx + unknown" rule.
func TestReconcile(t *testing.T) {
	tests := []struct {
		rows, ok, unknown int64
		wantOK            bool
	}{
		{10, 10, 0, true},
		{9, 10, 0, false},  // a 2xx without its row
		{11, 10, 0, false}, // a row nobody was told about
		{10, 10, 3, true},  // no unknown sold
		{13, 10, 3, true},  // every unknown sold
		{12, 10, 3, true},
		{14, 10, 3, false},
		{9, 10, 3, false}, // unknowns never excuse a missing row
	}
	for _, tt := range tests {
		got := Reconcile(tt.rows, tt.ok, tt.unknown)
		if (got == "") != tt.wantOK {
			t.Errorf("Reconcile(rows %d, 2xx %d, unknown %d) = %q, want ok %v", tt.rows, tt.ok, tt.unknown, got, tt.wantOK)
		}
	}
}

func TestJudgeProductFaulted(t *testing.T) {
	// A killed replica: 3 buyers got no definite answer, 2 of them sold.
	f := Figures{Buyers: 10, OK: 5, SoldOut: 2, Unavailable: 1, Errors: 2, Final: 3,
		Rounds: []RoundFigures{{Round: 1, Current: true, Initial: 10, Units: 7, Rows: 7, OK: 5}}}
	if j := judgeProduct(f, true, true); j.Verdict != Safe && j.Verdict != Undersold {
		t.Errorf("judgeProduct(faulted, 2 rows among 3 indefinite answers) = %s %v, want SAFE or UNDERSOLD", j.Verdict, j.Reasons)
	}
	f.Rounds[0].Rows, f.Rounds[0].Units, f.Final = 4, 4, 6 // a 2xx without its row
	if j := judgeProduct(f, true, true); j.Verdict != Broken {
		t.Errorf("judgeProduct(faulted, fewer rows than 2xx) = %s, want BROKEN", j.Verdict)
	}
	f.Rounds[0].Rows, f.Rounds[0].Units, f.Final = 11, 11, -1
	if j := judgeProduct(f, true, true); j.Verdict != Broken || j.Oversold != 1 {
		t.Errorf("judgeProduct(faulted, oversold) = %s oversold %d, want BROKEN 1", j.Verdict, j.Oversold)
	}
}

func TestCombineProducts(t *testing.T) {
	ids := []string{"p-1", "p-2", "p-3"}
	safe, under := Judgement{Verdict: Safe}, Judgement{Verdict: Undersold, Reasons: []string{"2 units left"}}
	broken := Judgement{Verdict: Broken, Reasons: []string{"oversold 1 unit: ledger 11 > initial 10"}}
	tests := []struct {
		name        string
		safe        bool
		js          []Judgement
		want        string
		wantReasons []string
	}{
		{"every product safe", true, []Judgement{safe, safe, safe}, Safe, nil},
		{"one undersold", true, []Judgement{safe, under, safe}, Undersold, []string{"p-2: 2 units left"}},
		{"one broken beats undersold", true, []Judgement{under, safe, broken}, Broken, []string{"p-3: oversold 1 unit: ledger 11 > initial 10"}},
		{"unsafe, one oversold", false, []Judgement{{Verdict: Oversold, Oversold: 3, Reasons: []string{"oversold 3 units"}}, {Verdict: NoOversell}, {Verdict: LostUpdates, Reasons: []string{"lost updates"}}},
			Oversold, []string{"p-1: oversold 3 units", "p-3: lost updates"}},
		{"unsafe, lost updates only", false, []Judgement{{Verdict: NoOversell}, {Verdict: LostUpdates, Reasons: []string{"lost updates"}}, {Verdict: NoOversell}},
			LostUpdates, []string{"p-2: lost updates"}},
		{"unsafe, lucky", false, []Judgement{{Verdict: NoOversell}, {Verdict: NoOversell}, {Verdict: NoOversell}}, NoOversell, nil},
	}
	for _, tt := range tests {
		got, reasons := combine(tt.safe, ids, tt.js)
		if got != tt.want || !slices.Equal(reasons, tt.wantReasons) {
			t.Errorf("combine(%s) = %s %q, want %s %q", tt.name, got, reasons, tt.want, tt.wantReasons)
		}
	}
	many := make([]Judgement, 20)
	var manyIDs []string
	for i := range many {
		many[i] = broken
		manyIDs = append(manyIDs, "p-"+strconv.Itoa(i+1))
	}
	if _, reasons := combine(true, manyIDs, many); len(reasons) != MaxProductReasons+1 || reasons[len(reasons)-1] != "… and 12 more products" {
		t.Errorf("combine(20 broken products) reasons %q, want %d and a count of the rest", reasons, MaxProductReasons+1)
	}
}
