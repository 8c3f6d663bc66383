package history

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// at is a moment t milliseconds into a test history.
func at(t int) time.Time { return time.Unix(1_700_000_000, 0).Add(time.Duration(t) * time.Millisecond) }

func sale(client int, q int64, from, to int, outcome Outcome, remaining int64) Op {
	return Op{Client: client, Product: "p", Kind: Sale, Quantity: q, Outcome: outcome, Remaining: remaining, Start: at(from), End: at(to)}
}

func restock(client int, q int64, round, from, to int, outcome Outcome) Op {
	return Op{Client: client, Product: "p", Kind: Restock, Quantity: q, Outcome: outcome, Remaining: -1, Round: round, Start: at(from), End: at(to)}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name          string
		init          State
		final         *State
		ops           []Op
		want          Verdict
		wantViolation string
	}{
		{
			name: "one buyer after another, then sold out",
			init: State{Stock: 10, Round: 1}, final: &State{Stock: 1, Round: 1},
			ops: []Op{
				sale(0, 3, 0, 1, Sold, 7), sale(0, 3, 2, 3, Sold, 4), sale(0, 3, 4, 5, Sold, 1), sale(0, 3, 6, 7, SoldOut, -1),
			},
			want: Linearizable,
		},
		{
			name: "overlapping sales may commit in either order",
			init: State{Stock: 2, Round: 1}, final: &State{Stock: 0, Round: 1},
			ops: []Op{
				sale(0, 1, 0, 10, Sold, 0), sale(1, 1, 1, 5, Sold, 1), sale(2, 1, 2, 12, SoldOut, -1),
			},
			want: Linearizable,
		},
		{
			name: "sold out with stock and nobody else buying",
			init: State{Stock: 5, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, SoldOut, -1)},
			want: NotLinearizable, wantViolation: "false sold-out",
		},
		{
			name: "two sales of the last unit, one after the other (an oversell)",
			init: State{Stock: 1, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, Sold, 0), sale(1, 1, 2, 3, Sold, 0)},
			want: NotLinearizable, wantViolation: "phantom sale",
		},
		{
			name: "two overlapping sales that both report the same remaining (a lost update)",
			init: State{Stock: 5, Round: 1},
			ops:  []Op{sale(0, 1, 0, 10, Sold, 4), sale(1, 1, 1, 9, Sold, 4)},
			want: NotLinearizable, wantViolation: "phantom sale",
		},
		{
			name: "a sale the buyer was told of is missing from the database",
			init: State{Stock: 5, Round: 1}, final: &State{Stock: 5, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, Sold, 4)},
			want: NotLinearizable, wantViolation: "final stock",
		},
		{
			name: "the database sold more than anyone was told",
			init: State{Stock: 5, Round: 1}, final: &State{Stock: 3, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, Sold, 4)},
			want: NotLinearizable, wantViolation: "final stock",
		},
		{
			name: "an unknown outcome that sold",
			init: State{Stock: 1, Round: 1}, final: &State{Stock: 0, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, Unknown, -1), sale(1, 1, 2, 3, SoldOut, -1)},
			want: Linearizable,
		},
		{
			name: "an unknown outcome that did not sell",
			init: State{Stock: 1, Round: 1}, final: &State{Stock: 0, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, Unknown, -1), sale(1, 1, 2, 3, Sold, 0)},
			want: Linearizable,
		},
		{
			name: "definite failures change nothing",
			init: State{Stock: 1, Round: 1}, final: &State{Stock: 0, Round: 1},
			ops:  []Op{sale(0, 1, 0, 1, Failed, -1), sale(1, 1, 2, 3, Sold, 0), sale(0, 1, 4, 5, Failed, -1)},
			want: Linearizable,
		},
		{
			name: "sold out after a restock was answered (a stale mark)",
			init: State{Stock: 0, Round: 1},
			ops:  []Op{restock(9, 5, 2, 0, 1, Sold), sale(0, 1, 2, 3, SoldOut, -1)},
			want: NotLinearizable, wantViolation: "false sold-out",
		},
		{
			name: "sold out while a restock is in flight",
			init: State{Stock: 0, Round: 1}, final: &State{Stock: 4, Round: 2},
			ops:  []Op{restock(9, 5, 2, 0, 10, Sold), sale(0, 1, 1, 3, SoldOut, -1), sale(1, 1, 11, 12, Sold, 4)},
			want: Linearizable,
		},
		{
			name: "a sale that says it sold in the old round after the restock was answered",
			init: State{Stock: 3, Round: 1},
			ops:  []Op{restock(9, 5, 2, 0, 1, Sold), {Client: 0, Product: "p", Kind: Sale, Quantity: 1, Outcome: Sold, Remaining: -1, Round: 1, Start: at(2), End: at(3)}},
			want: NotLinearizable, wantViolation: "phantom sale",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			final := map[string]State{}
			if c.final != nil {
				final["p"] = *c.final
			}
			res := Check(map[string]State{"p": c.init}, final, c.ops, Within(10*time.Second))
			if res.Verdict != c.want {
				t.Fatalf("Check = %s (%+v), want %s", res.Verdict, res.Products, c.want)
			}
			if len(res.Products) != 1 {
				t.Fatalf("Check gave %d products, want 1", len(res.Products))
			}
			if p := res.Products[0]; p.Violation != c.wantViolation {
				t.Errorf("violation %q (%s), want %q", p.Violation, p.Evidence, c.wantViolation)
			}
		})
	}
}

// TestCheckPerProduct: products are checked apart, and one product's
// violation fails the whole history while naming only that product.
func TestCheckPerProduct(t *testing.T) {
	ops := []Op{sale(0, 1, 0, 1, Sold, 0), sale(1, 1, 2, 3, Sold, 0)}
	ops[1].Product = "q"
	bad := sale(2, 1, 4, 5, SoldOut, -1)
	bad.Product = "r"
	ops = append(ops, bad)
	init := map[string]State{"p": {1, 1}, "q": {1, 1}, "r": {2, 1}}
	res := Check(init, nil, ops, Within(10*time.Second))
	if res.Verdict != NotLinearizable {
		t.Fatalf("Check = %s, want %s", res.Verdict, NotLinearizable)
	}
	failed := res.Failed()
	if len(failed) != 1 || failed[0].Product != "r" || failed[0].Violation != "false sold-out" {
		t.Errorf("Failed() = %+v, want only r, a false sold-out", failed)
	}
}

// TestCheckTimesOutInconclusive: a history too large to settle in the time
// given is Inconclusive, never a pass.
func TestCheckTimesOutInconclusive(t *testing.T) {
	var ops []Op
	const buyers = 3000
	for i := range buyers {
		// Everyone overlaps everyone: each reports a distinct remaining.
		ops = append(ops, sale(i, 1, i%7, 100000-i%5, Sold, int64(buyers-1-i)))
	}
	res := Check(map[string]State{"p": {buyers, 1}}, nil, ops, Within(time.Nanosecond))
	if res.Verdict != Inconclusive {
		t.Errorf("Check of %d overlapping sales with 1ns = %s, want %s", buyers, res.Verdict, Inconclusive)
	}
}

func TestWriteHTML(t *testing.T) {
	res := Check(map[string]State{"p": {1, 1}}, nil, []Op{sale(0, 1, 0, 1, Sold, 0), sale(1, 1, 2, 3, Sold, 0)}, Within(10*time.Second))
	path := filepath.Join(t.TempDir(), "p.html")
	if err := res.Products[0].WriteHTML(path); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "<html") || !strings.Contains(string(b), "sell 1") {
		t.Errorf("WriteHTML wrote %d bytes, %v; want an HTML page describing the sales", len(b), err)
	}
}

// simulated is a linearizable history like a load test's: buyers of one
// product, concurrency of them in flight at once, each sale taking effect
// at a moment inside its request, the first stock of them sold and the rest
// told sold out.
func simulated(buyers, stock, concurrency int, seed uint64) ([]Op, State) {
	r := rand.New(rand.NewPCG(seed, seed))
	ops := make([]Op, buyers)
	left := int64(stock)
	for i := range ops {
		point := i * 10 // the moment it takes effect, in ms
		from := point - r.IntN(10*concurrency/2+1)
		to := point + r.IntN(10*concurrency/2+1)
		if left > 0 {
			left--
			ops[i] = sale(i, 1, from, to, Sold, left)
		} else {
			ops[i] = sale(i, 1, from, to, SoldOut, -1)
		}
	}
	return ops, State{Stock: left, Round: 1}
}

func TestCheckSimulatedLoad(t *testing.T) {
	for _, c := range []struct{ buyers, stock, concurrency int }{{400, 250, 16}, {400, 250, 64}, {2000, 500, 16}} {
		ops, final := simulated(c.buyers, c.stock, c.concurrency, 1)
		began := time.Now()
		res := Check(map[string]State{"p": {int64(c.stock), 1}}, map[string]State{"p": final}, ops, Within(time.Minute))
		t.Logf("%d buyers, stock %d, %d at once: %s in %v", c.buyers, c.stock, c.concurrency, res.Verdict, time.Since(began))
		if res.Verdict != Linearizable {
			t.Errorf("simulated linearizable load (%d buyers, stock %d, %d at once) = %s %+v", c.buyers, c.stock, c.concurrency, res.Verdict, res.Failed())
		}
	}
}

// TestCheckFindsAnOversellInALoad: one more buyer told "sold" than there
// was stock, hidden in a load, fails the check (and does not time out).
func TestCheckFindsAnOversellInALoad(t *testing.T) {
	ops, final := simulated(400, 250, 64, 2)
	extra := ops[100]
	extra.Client = len(ops)
	ops = append(ops, extra)
	final.Stock--
	began := time.Now()
	res := Check(map[string]State{"p": {250, 1}}, map[string]State{"p": final}, ops, Within(time.Minute))
	t.Logf("%s in %v: %+v", res.Verdict, time.Since(began), res.Failed())
	if res.Verdict != NotLinearizable {
		t.Errorf("Check with one sale too many = %s, want %s", res.Verdict, NotLinearizable)
	}
}

// TestCheckFailsAnOversoldLoadAtOnce: a load like the unsafe strategies'
// — 64 buyers at once, lost updates (several told the same remaining),
// more told "sold" than the round had, the stock below zero — is NOT
// LINEARIZABLE within a second, with a page to show, instead of running
// porcupine out of time; the same load without the oversell still passes.
func TestCheckFailsAnOversoldLoadAtOnce(t *testing.T) {
	inRound := func(ops []Op) []Op {
		for i := range ops {
			ops[i].Round = 1
		}
		return ops
	}
	ok, final := simulated(400, 250, 64, 3)
	if res := Check(map[string]State{"p": {250, 1}}, map[string]State{"p": final}, inRound(ok), Within(time.Minute)); res.Verdict != Linearizable {
		t.Fatalf("the load without an oversell = %s %+v, want %s", res.Verdict, res.Failed(), Linearizable)
	}

	cases := []struct {
		name  string
		spoil func(ops []Op, final *State) []Op
		want  string
	}{
		{"two told the same remaining", func(ops []Op, _ *State) []Op {
			ops[101].Remaining = ops[100].Remaining
			return ops
		}, "wrong remaining"},
		{"more sold than the round had", func(ops []Op, final *State) []Op {
			for i := range ops {
				if ops[i].Outcome == SoldOut {
					ops[i].Outcome, ops[i].Remaining = Sold, -1
				}
			}
			final.Stock = 0
			return ops
		}, "phantom sale"},
		{"told a remaining below zero", func(ops []Op, _ *State) []Op {
			ops[300].Outcome, ops[300].Remaining = Sold, -7
			return ops
		}, "phantom sale"},
		{"the database below zero", func(ops []Op, final *State) []Op {
			final.Stock = -31
			return ops
		}, "final stock"},
	}
	for _, c := range cases {
		ops, final := simulated(400, 250, 64, 3)
		ops = c.spoil(inRound(ops), &final)
		began := time.Now()
		res := Check(map[string]State{"p": {250, 1}}, map[string]State{"p": final}, ops, Within(time.Minute))
		took := time.Since(began)
		if res.Verdict != NotLinearizable || res.Products[0].Violation != c.want || took > 5*time.Second {
			t.Errorf("%s: Check = %s %+v in %v, want %s (%s) within 5s", c.name, res.Verdict, res.Failed(), took, NotLinearizable, c.want)
			continue
		}
		if err := res.Products[0].WriteHTML(filepath.Join(t.TempDir(), "p.html")); err != nil {
			t.Errorf("%s: WriteHTML: %v", c.name, err)
		}
	}
}
