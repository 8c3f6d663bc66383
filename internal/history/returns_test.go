package history

import (
	"testing"
	"time"
)

// ret is a return of q units of the order of round, inside from–to.
func ret(client int, q int64, round, from, to int, outcome Outcome) Op {
	return Op{Client: client, Product: "p", Kind: Return, Quantity: q, Outcome: outcome, Remaining: -1, Round: round, Start: at(from), End: at(to)}
}

// TestReturns: a hold is a sale (its units gone), a return gives them back
// inside its window, and a sold-out answered after a return that no other
// sale explains is NOT LINEARIZABLE: a replica that did not forget its
// sold-out mark. The same sold-out before the return is true.
func TestReturns(t *testing.T) {
	hold := func(client int, from, to int, remaining int64) Op {
		op := sale(client, 1, from, to, Sold, remaining)
		op.Round = 1
		return op
	}
	cases := []struct {
		name          string
		final         *State
		ops           []Op
		want          Verdict
		wantViolation string
	}{
		{
			name: "sold out after a cancel was answered, nobody buying in between",
			ops:  []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 3, Sold), sale(2, 1, 10, 11, SoldOut, -1)},
			want: NotLinearizable, wantViolation: "false sold-out",
		},
		{
			name: "sold out before the cancel was sent",
			ops:  []Op{hold(0, 0, 1, 0), sale(2, 1, 2, 3, SoldOut, -1), ret(1, 1, 1, 10, 11, Sold)},
			want: Linearizable,
		},
		{
			name: "sold out while the cancel is in flight",
			ops:  []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 20, Sold), sale(2, 1, 10, 11, SoldOut, -1)},
			want: Linearizable,
		},
		{
			name: "sold out after an expiry was seen, the returned unit bought by nobody",
			ops:  []Op{hold(0, 0, 1, 0), ret(9, 1, 1, 1000, 1050, Sold), sale(2, 1, 1100, 1101, SoldOut, -1)},
			want: NotLinearizable, wantViolation: "false sold-out",
		},
		{
			name: "sold out after a return, someone else bought the unit back first",
			ops:  []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 3, Sold), hold(3, 4, 5, 0), sale(2, 1, 10, 11, SoldOut, -1)},
			want: Linearizable,
		},
		{
			name:  "a returned unit sold again leaves the same remaining twice",
			final: &State{Stock: 0, Round: 1},
			ops:   []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 3, Sold), hold(3, 4, 5, 0)},
			want:  Linearizable,
		},
		{
			name: "a sale of a unit that never came back",
			ops:  []Op{hold(0, 0, 1, 0), hold(3, 4, 5, 0)},
			want: NotLinearizable, wantViolation: "phantom sale",
		},
		{
			name:  "a return whose answer was lost may not have happened",
			final: &State{Stock: 0, Round: 1},
			ops:   []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 3, Unknown), sale(2, 1, 10, 11, SoldOut, -1)},
			want:  Linearizable,
		},
		{
			name:  "a return whose answer was lost, then the database shows it happened",
			final: &State{Stock: 1, Round: 1},
			ops:   []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 3, Unknown), sale(2, 1, 10, 11, SoldOut, -1)},
			want:  Linearizable,
		},
		{
			name:  "the database holds a unit no return gave back",
			final: &State{Stock: 1, Round: 1},
			ops:   []Op{hold(0, 0, 1, 0), ret(1, 1, 1, 2, 3, Failed)},
			want:  NotLinearizable, wantViolation: "final stock",
		},
		{
			name:  "a return of an old round gives the new round nothing",
			final: &State{Stock: 5, Round: 2},
			ops:   []Op{hold(0, 0, 1, 0), restock(8, 5, 2, 2, 3, Sold), ret(1, 1, 1, 4, 5, Sold), sale(2, 1, 10, 11, Sold, 4)},
			want:  NotLinearizable, wantViolation: "final stock",
		},
		{
			name:  "a return of an old round, the new round sold from its own stock",
			final: &State{Stock: 4, Round: 2},
			ops:   []Op{hold(0, 0, 1, 0), restock(8, 5, 2, 2, 3, Sold), ret(1, 1, 1, 4, 5, Sold), sale(2, 1, 10, 11, Sold, 4)},
			want:  Linearizable,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			final := map[string]State{}
			if c.final != nil {
				final["p"] = *c.final
			}
			res := Check(map[string]State{"p": {Stock: 1, Round: 1}}, final, c.ops, Within(10*time.Second))
			if res.Verdict != c.want {
				t.Fatalf("Check = %s (%+v), want %s", res.Verdict, res.Products, c.want)
			}
			if p := res.Products[0]; p.Violation != c.wantViolation {
				t.Errorf("violation %q (%s), want %q", p.Violation, p.Evidence, c.wantViolation)
			}
		})
	}
}
