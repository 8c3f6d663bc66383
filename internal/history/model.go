package history

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type input struct {
	kind  Kind
	q     int64
	round int // a return's: the order's round
}

type output struct {
	outcome   Outcome
	remaining int64
	round     int
}

// model is one product's stock as a sequential object.
var model = porcupine.NondeterministicModel{
	Init: func() []any { panic("history: Init is set per product") },
	Step: func(state, in, out any) []any {
		return step(state.(State), in.(input), out.(output))
	},
	Equal: func(a, b any) bool { return a.(State) == b.(State) },
	Hash: func(s any) uint64 {
		st := s.(State)
		return uint64(st.Stock)*1_000_003 + uint64(st.Round)
	},
	DescribeOperation: func(in, out any) string { return describe(in.(input), out.(output)) },
	DescribeState: func(s any) string {
		st := s.(State)
		return fmt.Sprintf("stock %d, round %d", st.Stock, st.Round)
	},
}

// step is every state s can go to by one op with this answer; none when the
// answer is impossible in s.
func step(s State, in input, out output) []any {
	switch in.kind {
	case Sale:
		sold := State{Stock: s.Stock - in.q, Round: s.Round}
		switch out.outcome {
		case Sold:
			if s.Stock < in.q || (out.round > 0 && out.round != s.Round) || (out.remaining >= 0 && out.remaining != sold.Stock) {
				return nil
			}
			return []any{sold}
		case SoldOut:
			if s.Stock < in.q {
				return []any{s}
			}
			return nil
		case Unknown:
			if s.Stock >= in.q {
				return []any{s, sold}
			}
			return []any{s}
		default:
			return []any{s}
		}
	case Restock:
		next := State{Stock: in.q, Round: s.Round + 1}
		if out.round > 0 {
			next.Round = out.round
		}
		switch out.outcome {
		case Sold:
			return []any{next}
		case Unknown:
			return []any{s, next}
		default:
			return []any{s}
		}
	case Return:
		back := s
		if in.round == s.Round {
			back.Stock += in.q
		}
		switch out.outcome {
		case Sold:
			return []any{back}
		case Unknown:
			return []any{s, back}
		default:
			return []any{s}
		}
	case Read:
		if s.Stock == in.q && (out.round == 0 || out.round == s.Round) {
			return []any{s}
		}
		return nil
	}
	return nil
}

func describe(in input, out output) string {
	switch in.kind {
	case Sale:
		s := fmt.Sprintf("sell %d → %s", in.q, out.outcome)
		if out.outcome == Sold && out.remaining >= 0 {
			s += fmt.Sprintf(", %d left", out.remaining)
		}
		return s
	case Restock:
		return fmt.Sprintf("restock to %d → %s", in.q, out.outcome)
	case Read:
		return fmt.Sprintf("database: stock %d", in.q)
	case Return:
		return fmt.Sprintf("return %d of round %d → %s", in.q, in.round, out.outcome)
	}
	return "?"
}

// checkWindows checks one product's ops (and its final reading, if any),
// window by window (see the package doc), and sums up the windows: the
// first that is not Linearizable decides the product's verdict.
func checkWindows(id string, init State, final map[string]State, ops []Op, budget Budget) ProductResult {
	var fin *State
	if f, ok := final[id]; ok {
		fin = &f
	}
	windows, reads := splitAtQuiescentReadings(ops)
	out := ProductResult{Product: id, Verdict: Linearizable}
	state := init
	for i, w := range windows {
		end := fin
		if i < len(reads) {
			r := reads[i]
			end = &State{Stock: r.Quantity, Round: r.Round}
		}
		pr := checkProduct(id, state, end, w, budget)
		out.Ops += pr.Ops
		out.Took += pr.Took
		out.Windows++
		out.Budget = max(out.Budget, pr.Budget)
		if pr.Verdict != Linearizable && out.Verdict == Linearizable {
			out.Verdict, out.Violation, out.Evidence, out.viz = pr.Verdict, pr.Violation, pr.Evidence, pr.viz
		}
		if out.viz == nil {
			out.viz = pr.viz
		}
		if end != nil {
			state = *end
		}
	}
	return out
}

// splitAtQuiescentReadings cuts ops (one product's) at each reading of the
// database taken while none of the other ops was in flight: every op before
// it had its answer before the reading began and may not take effect later
// (not Late, not Unknown), every op after it began after the reading had
// its answer, and the reading knows its round. It returns the windows,
// the reading that ends each but the last, and the rest of the ops as the
// last window (its reading is the final one). A reading taken while ops
// were in flight stays in its window, an op like any other.
func splitAtQuiescentReadings(ops []Op) (windows [][]Op, reads []Op) {
	sorted := append([]Op(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start.Before(sorted[j].Start) })
	from := 0
	for i, r := range sorted {
		if r.Kind != Read || r.Round <= 0 {
			continue
		}
		quiet := true
		for j, op := range sorted[from:] {
			if from+j == i || op.Kind == Read {
				continue
			}
			before := !op.End.After(r.Start) && !op.lingers()
			after := !op.Start.Before(r.End)
			if !before && !after {
				quiet = false
				break
			}
		}
		if !quiet {
			continue
		}
		windows, reads, from = append(windows, sorted[from:i]), append(reads, r), i+1
	}
	return append(windows, sorted[from:]), reads
}

// ownSearchShare bounds the search of search.go when the check itself is
// unbounded (Budget nil or 0): porcupine then goes on without a bound.
const ownSearchShare = 10 * time.Second

// checkProduct checks one window of a product's ops from init (and its
// reading at the end, fin, if any).
func checkProduct(id string, init State, fin *State, ops []Op, budget Budget) ProductResult {
	began := time.Now()
	var base, last time.Time
	for i, op := range ops {
		if i == 0 || op.Start.Before(base) {
			base = op.Start
		}
		if op.End.After(last) {
			last = op.End
		}
	}
	at := func(t time.Time) int64 { return int64(t.Sub(base)) }
	// Ops that may take effect after their answer may do so any time up
	// to the final reading, which comes after everything.
	unknownEnd := at(last) + 1
	readAt := at(last) + 2

	history := make([]porcupine.Operation, 0, len(ops)+1)
	for _, op := range ops {
		end := at(op.End)
		if op.lingers() {
			end = unknownEnd
		}
		remaining := op.Remaining
		if op.Kind != Sale {
			remaining = -1
		}
		history = append(history, porcupine.Operation{
			ClientId: op.Client,
			Input:    input{kind: op.Kind, q: op.Quantity, round: op.Round},
			Call:     at(op.Start),
			Output:   output{outcome: op.Outcome, remaining: remaining, round: op.Round},
			Return:   end,
		})
	}
	if fin != nil {
		history = append(history, porcupine.Operation{
			ClientId: maxClient(ops) + 1,
			Input:    input{kind: Read, q: fin.Stock},
			Call:     readAt,
			Output:   output{outcome: Sold, remaining: -1, round: fin.Round},
			Return:   readAt,
		})
	}
	var timeout time.Duration
	if budget != nil {
		timeout = budget(len(history))
	}

	m := model
	m.Init = func() []any { return []any{init} }
	pm := m.ToModel()
	if violation, evidence := refute(init, fin, ops); violation != "" {
		// Refuted without a search: porcupine only draws the page, when it
		// is asked for, from the orders that come closest within a second.
		pr := ProductResult{Product: id, Ops: len(history), Took: time.Since(began), Windows: 1, Budget: timeout,
			Verdict: NotLinearizable, Violation: violation, Evidence: evidence}
		pr.viz = func(path string) error {
			budget := time.Second
			if timeout > 0 {
				budget = min(timeout, budget)
			}
			_, info := porcupine.CheckOperationsVerbose(pm, history, budget)
			return porcupine.VisualizePath(pm, info, path)
		}
		return pr
	}
	// Our search first (search.go), on half the budget: an order it finds
	// is certified before it counts; otherwise porcupine decides on what
	// is left of the budget.
	share := ownSearchShare
	if timeout > 0 {
		share = timeout / 2
	}
	if order, _ := linearize(init, history, time.Now().Add(share)); order != nil {
		if err := certify(init, history, order); err == nil {
			pr := ProductResult{Product: id, Ops: len(history), Took: time.Since(began), Windows: 1, Budget: timeout, Verdict: Linearizable}
			pr.viz = func(path string) error {
				_, info := porcupine.CheckOperationsVerbose(pm, history, max(timeout, time.Second))
				return porcupine.VisualizePath(pm, info, path)
			}
			return pr
		}
	}
	rest := timeout
	if timeout > 0 {
		rest = max(timeout-time.Since(began), time.Millisecond)
	}
	result, info := porcupine.CheckOperationsVerbose(pm, history, rest)
	pr := ProductResult{Product: id, Ops: len(history), Took: time.Since(began), Windows: 1, Budget: timeout}
	pr.viz = func(path string) error { return porcupine.VisualizePath(pm, info, path) }
	switch result {
	case porcupine.Ok:
		pr.Verdict = Linearizable
	case porcupine.Unknown:
		pr.Verdict = Inconclusive
		pr.Evidence = fmt.Sprintf("no order found or ruled out within its budget of %v", timeout)
	default:
		pr.Verdict = NotLinearizable
		pr.Violation, pr.Evidence = explain(history, info)
	}
	return pr
}

// refute looks for what no order of ops can explain without searching
// orders at all, so that a history that oversold is failed at once instead
// of after porcupine has tried every order of thousands of overlapping
// sales. Within a round stock falls by each sale, rises only by a return,
// and never goes below zero: so no two sales of a round without returns
// leave the same remaining, none leaves less than zero, a round's sales
// answered "sold" add up to at most its initial stock and the units that
// may have been returned to it, and the final stock is not negative. It
// returns the violation and its evidence, or "" when none of these shows
// one (which proves nothing either way).
func refute(init State, final *State, ops []Op) (violation, evidence string) {
	initial := map[int]int64{init.Round: init.Stock} // each round's first stock, where known
	// Units that may have come back to each round: stock rises by them, so
	// they may be sold again, and two sales may then leave the same stock.
	returned := map[int]int64{}
	for _, op := range ops {
		if op.Kind == Restock && op.Outcome == Sold && op.Round > 0 {
			initial[op.Round] = op.Quantity
		}
		if op.Kind == Return && op.Outcome != Failed {
			returned[op.Round] += op.Quantity
		}
	}
	type left struct {
		round     int
		remaining int64
	}
	seen := map[left]Op{}
	sold := map[int]int64{}
	var twice string // the first two sales told the same remaining
	for _, op := range ops {
		if op.Kind != Sale || op.Outcome != Sold || op.Round <= 0 {
			continue
		}
		if op.Remaining < -1 {
			return "phantom sale", fmt.Sprintf("client %d: sell %d → sold, %d left in round %d: stock never goes below 0", op.Client, op.Quantity, op.Remaining, op.Round)
		}
		if op.Remaining >= 0 {
			k := left{op.Round, op.Remaining}
			if other, ok := seen[k]; ok && twice == "" && returned[op.Round] == 0 {
				twice = fmt.Sprintf("clients %d and %d were both told %d left in round %d: two sales cannot leave the same stock "+
					"(a lost update, or an answer that reports the stock of another moment)", other.Client, op.Client, op.Remaining, op.Round)
			}
			seen[k] = op
		}
		sold[op.Round] += op.Quantity
	}
	rounds := make([]int, 0, len(sold))
	for round := range sold {
		rounds = append(rounds, round)
	}
	sort.Ints(rounds)
	for _, round := range rounds {
		if first, ok := initial[round]; ok && sold[round] > first+returned[round] {
			units := sold[round]
			return "phantom sale", fmt.Sprintf("%d units answered sold in round %d, which began with %d and had %d returned",
				units, round, first, returned[round])
		}
	}
	if twice != "" {
		return "wrong remaining", twice
	}
	// Last: what buyers were told names the untrue answer better.
	if final != nil && final.Stock < 0 {
		return "final stock", fmt.Sprintf("the database holds %d units: no order of sales takes stock below 0", final.Stock)
	}
	return "", ""
}

// explain names the first op (by call time) that the longest order found
// could not place, and what kind of untrue answer that makes it.
func explain(history []porcupine.Operation, info porcupine.LinearizationInfo) (violation, evidence string) {
	placed := map[int]bool{}
	longest := 0
	for _, partials := range info.PartialLinearizations() {
		for _, p := range partials {
			if len(p) > longest {
				longest = len(p)
				placed = map[int]bool{}
				for _, i := range p {
					placed[i] = true
				}
			}
		}
	}
	order := make([]int, len(history))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return history[order[a]].Call < history[order[b]].Call })
	for _, i := range order {
		if placed[i] {
			continue
		}
		op := history[i]
		in, out := op.Input.(input), op.Output.(output)
		ev := fmt.Sprintf("client %d: %s (at %v–%v); %d of %d ops placed before it", op.ClientId, describe(in, out),
			time.Duration(op.Call), time.Duration(op.Return), len(placed), len(history))
		switch {
		case in.kind == Read:
			return "final stock", ev
		case in.kind == Restock:
			return "restock", ev
		case in.kind == Return:
			return "return", ev
		case out.outcome == SoldOut:
			return "false sold-out", ev
		case out.outcome == Sold:
			return "phantom sale", ev
		}
		return "unexplained", ev
	}
	return "unexplained", fmt.Sprintf("%d ops, none left unplaced by the longest order", len(history))
}

func maxClient(ops []Op) int {
	m := 0
	for _, op := range ops {
		m = max(m, op.Client)
	}
	return m
}
