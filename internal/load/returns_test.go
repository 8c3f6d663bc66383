package load

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"inventory/internal/history"
)

// TestMergeReturns: the returns one transaction wrote of one product and
// round are one op of all their units, from their latest start to their
// earliest end; returns of another transaction, product or round, or of
// none known, stay apart; a window whose end came before its start (the
// clocks differ) ends at its start.
func TestMergeReturns(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1_700_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
	ret := func(tx, product string, round int, q int64, from, to int) returnOp {
		return returnOp{tx: tx, op: history.Op{Product: product, Kind: history.Return, Quantity: q, Outcome: history.Sold, Remaining: -1,
			Round: round, Start: at(from), End: at(to)}}
	}
	got := mergeReturns([]returnOp{
		ret("7", "p", 1, 1, 100, 300), ret("7", "p", 1, 2, 120, 260), ret("7", "p", 1, 1, 90, 280), // one sweep: 4 units, 120–260
		ret("7", "q", 1, 1, 100, 300),                              // the same transaction, another product
		ret("7", "p", 2, 1, 100, 300),                              // another round
		ret("8", "p", 1, 1, 100, 300),                              // another transaction
		ret("", "p", 1, 1, 100, 300), ret("", "p", 1, 1, 100, 300), // not known: apart
		ret("9", "p", 1, 1, 200, 250), ret("9", "p", 1, 1, 260, 300), // clocks apart: 260–260
	})
	op := func(product string, round int, q int64, from, to int) history.Op {
		return history.Op{Product: product, Kind: history.Return, Quantity: q, Outcome: history.Sold, Remaining: -1, Round: round, Start: at(from), End: at(to)}
	}
	want := []history.Op{op("p", 1, 4, 120, 260), op("q", 1, 1, 100, 300), op("p", 2, 1, 100, 300), op("p", 1, 1, 100, 300),
		op("p", 1, 1, 100, 300), op("p", 1, 1, 100, 300), op("p", 1, 2, 260, 260)}
	if !slices.Equal(got, want) {
		t.Errorf("mergeReturns =\n%+v\nwant\n%+v", got, want)
	}
}

// TestASweepsReturnsCheckAsOne: a history such as a runner-pause run
// leaves — buyers waiting out a paused replica across a stretch in which
// the expiry job returned 16 units at each sweep, a sweep's returns
// sharing one window — checks LINEARIZABLE with each sweep's returns one
// op (mergeReturns), as it does with each apart. With one false answer (the
// database holds a unit more than the answers lead to) it is NOT
// LINEARIZABLE at once merged; apart, no search rules out the 2^16 ways
// to place each batch within 2 s (measured: not in 20 s either), and the
// violation would be INCONCLUSIVE.
func TestASweepsReturnsCheckAsOne(t *testing.T) {
	sales, returns, init, final := pausedSweepHistory(3)
	apart := slices.Clone(sales)
	for _, r := range returns {
		apart = append(apart, r.op)
	}
	merged := append(slices.Clone(sales), mergeReturns(returns)...)
	if len(merged) != len(sales)+3 {
		t.Fatalf("%d returns merged into %d ops, want 3 (one per sweep)", len(returns), len(merged)-len(sales))
	}
	if res := history.Check(init, final, merged, DefaultHistoryBudget); res.Verdict != history.Linearizable {
		t.Fatalf("true history, each sweep's returns one op: %s, want %s", res.Verdict, history.Linearizable)
	}
	f := final["p"]
	f.Stock++
	final["p"] = f
	if res := history.Check(init, final, apart, history.Within(2*time.Second)); res.Verdict != history.Inconclusive {
		t.Fatalf("false history, each return apart: %s, want %s (the case merging is for)", res.Verdict, history.Inconclusive)
	}
	began := time.Now()
	res := history.Check(init, final, merged, DefaultHistoryBudget)
	if res.Verdict != history.NotLinearizable || res.Products[0].Violation != "final stock" || time.Since(began) > 5*time.Second {
		t.Errorf("false history, each sweep's returns one op: %s (%s) in %v, want %s (final stock) within 5s",
			res.Verdict, res.Products[0].Violation, time.Since(began), history.NotLinearizable)
	}
}

// pausedSweepHistory is a linearizable history of product p: clients
// 0–15 buy one unit at a time, each sale taking effect inside its window
// and answering the stock it left; 0.3 s in, a replica pauses for 3 s:
// half the clients' sales sent during the pause take effect as they are
// sent and are answered only after it, while the other clients buy on
// and, every 0.9 s, a sweep returns 16 units of expired orders in one
// transaction (its returns share a window). It returns the sales and the
// returns apart, each return labelled with its sweep's transaction.
func pausedSweepHistory(seed uint64) (sales []history.Op, returns []returnOp, init, final map[string]history.State) {
	r := rand.New(rand.NewPCG(seed, seed))
	base := time.Unix(1_700_000_000, 0)
	ms := func(n float64) time.Time { return base.Add(time.Duration(n * float64(time.Millisecond))) }
	const stock = 200
	left := int64(stock)
	type effect struct {
		at     float64
		client int
		ret    int // units returned (a sweep); 0 for a sale
	}
	var effects []effect
	clock := 0.0
	const pauseAt, pauseFor = 300.0, 3000.0
	hung := map[int]float64{} // client → when its hung sale was sent
	for clock < pauseAt+pauseFor+300 {
		clock += 4 + 4*r.Float64()
		c := r.IntN(16)
		if _, ok := hung[c]; ok {
			continue
		}
		if clock > pauseAt && clock < pauseAt+pauseFor && c < 8 {
			hung[c] = clock
		}
		effects = append(effects, effect{at: clock, client: c})
	}
	for k := 1.0; k <= 3; k++ {
		effects = append(effects, effect{at: pauseAt + k*900, client: -1, ret: 16})
	}
	slices.SortFunc(effects, func(a, b effect) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	next := 1_000
	for _, e := range effects {
		if e.ret > 0 {
			left += int64(e.ret)
			for range e.ret {
				returns = append(returns, returnOp{tx: fmt.Sprint(e.at), op: history.Op{Client: next, Product: "p", Kind: history.Return,
					Quantity: 1, Outcome: history.Sold, Remaining: -1, Round: 1, Start: ms(e.at - 100), End: ms(e.at + 20)}})
				next++
			}
			continue
		}
		op := history.Op{Client: e.client, Product: "p", Kind: history.Sale, Quantity: 1, Remaining: -1, Start: ms(e.at - r.Float64()*5),
			End: ms(e.at + r.Float64()*5)}
		if sent, ok := hung[e.client]; ok && e.at >= sent {
			// Sent as the pause began, it took effect at some moment
			// of it and was answered once it ended.
			op.Start, op.End = ms(sent), ms(pauseAt+pauseFor+r.Float64()*200)
			delete(hung, e.client)
		}
		if left > 0 {
			left--
			op.Outcome, op.Round, op.Remaining = history.Sold, 1, left
		} else {
			op.Outcome = history.SoldOut
		}
		sales = append(sales, op)
	}
	return sales, returns, map[string]history.State{"p": {Stock: stock, Round: 1}}, map[string]history.State{"p": {Stock: left, Round: 1}}
}
