package history

import (
	"testing"
	"time"
)

func read(client int, stock int64, round, from, to int) Op {
	return Op{Client: client, Product: "p", Kind: Read, Quantity: stock, Outcome: Sold, Remaining: -1, Round: round, Start: at(from), End: at(to)}
}

// TestCheckSplitsAtAQuiescentReading: a reading taken while no op was in
// flight cuts the history in two windows, each checked from what was read
// (so a wrong reading fails, as the final one does); a reading taken while
// a sale was in flight, or while a sale that may still take effect was
// pending, stays an op of one window.
func TestCheckSplitsAtAQuiescentReading(t *testing.T) {
	before := []Op{sale(0, 1, 0, 10, Sold, 4), sale(1, 1, 5, 20, Sold, 3), sale(2, 1, 8, 25, Failed, -1)}
	after := []Op{sale(0, 1, 40, 50, Sold, 2), sale(1, 1, 45, 55, Sold, 1)}
	for i := range before {
		before[i].Round = 1
	}
	final := map[string]State{"p": {Stock: 1, Round: 1}}
	for _, tc := range []struct {
		name        string
		ops         []Op
		want        Verdict
		wantWindows int
	}{
		{"quiet reading, right", append(append(append([]Op{}, before...), read(9, 3, 1, 30, 31)), after...), Linearizable, 2},
		{"quiet reading, wrong", append(append(append([]Op{}, before...), read(9, 2, 1, 30, 31)), after...), NotLinearizable, 2},
		{"a sale in flight across the reading", append(append([]Op{}, before...), read(9, 3, 1, 30, 31), sale(3, 1, 29, 33, Sold, 2), sale(0, 1, 40, 50, Sold, 1)), Linearizable, 1},
		{"a late sale before the reading", append(append(append([]Op{}, before...), read(9, 3, 1, 30, 31), Op{Client: 4, Product: "p", Kind: Sale, Quantity: 1,
			Outcome: Sold, Remaining: -1, Round: 1, Start: at(1), End: at(2), Late: true}), after[:1]...), Linearizable, 1},
	} {
		// The late sale took effect after the reading and the sale after
		// it: checked from the reading on its own, the window after it
		// would miss it and fail the final stock.
		res := Check(map[string]State{"p": {Stock: 5, Round: 1}}, final, tc.ops, Within(10*time.Second))
		p := res.Products[0]
		if p.Verdict != tc.want || p.Windows != tc.wantWindows {
			t.Errorf("%s: Check = %s in %d windows (%s: %s), want %s in %d", tc.name, p.Verdict, p.Windows, p.Violation, p.Evidence, tc.want, tc.wantWindows)
		}
	}
}

// TestALateSaleMayTakeEffectAfterItsAnswer: a sale the ledger shows sold,
// whose answer said nothing, may have committed after its answer came;
// marked Late, it explains a later buyer told one unit fewer than the
// sales answered before would leave, and the same op without Late does
// not.
func TestALateSaleMayTakeEffectAfterItsAnswer(t *testing.T) {
	late := Op{Client: 0, Product: "p", Kind: Sale, Quantity: 1, Outcome: Sold, Remaining: -1, Round: 1, Start: at(0), End: at(1), Late: true}
	ops := []Op{late, sale(1, 1, 2, 3, Sold, 4), sale(1, 1, 4, 5, Sold, 2)}
	ops[1].Round, ops[2].Round = 1, 1
	init, final := map[string]State{"p": {Stock: 5, Round: 1}}, map[string]State{"p": {Stock: 2, Round: 1}}
	if res := Check(init, final, ops, Within(10*time.Second)); res.Verdict != Linearizable {
		t.Errorf("a late sale that committed after its answer: %s %+v, want %s", res.Verdict, res.Failed(), Linearizable)
	}
	ops[0].Late = false
	if res := Check(init, final, ops, Within(10*time.Second)); res.Verdict != NotLinearizable {
		t.Errorf("the same sale, not late: %s, want %s", res.Verdict, NotLinearizable)
	}
}

// TestScaledBudget: a scaled budget grows with the window's ops, and is
// what the check was given.
func TestScaledBudget(t *testing.T) {
	b := Scaled(10*time.Second, time.Millisecond)
	if got := b(2000); got != 12*time.Second {
		t.Errorf("Scaled(10s, 1ms)(2000) = %v, want 12s", got)
	}
	ops, final := simulated(400, 250, 16, 5)
	res := Check(map[string]State{"p": {250, 1}}, map[string]State{"p": final}, ops, b)
	if p := res.Products[0]; p.Verdict != Linearizable || p.Budget != 10*time.Second+time.Duration(p.Ops)*time.Millisecond {
		t.Errorf("Check with Scaled(10s, 1ms) = %s, budget %v for %d ops; want %s, 10s + 1ms each", p.Verdict, p.Budget, p.Ops, Linearizable)
	}
}
