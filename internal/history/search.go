package history

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// This file is a search for one order of a window's ops that explains every
// answer, tried before porcupine's (checkProduct). Porcupine tries the ops
// in the order they were sent and remembers the states it has been in; on
// a product whose stock goes up and down near zero (holds, returns, and a
// crowd told "sold out" meanwhile) it tried every subset of interchangeable
// ops in turn, and ran out of its budget on histories of ~460 ops that
// this search orders in under a second. Three things make the difference,
// each keeping the search complete:
//
//   - Reads go first. An op that never changes the state (a "sold out",
//     a reading), callable now and true in every state the search may be
//     in, is placed at once and never reconsidered: placing it later only
//     leaves fewer moments to place it.
//   - Twins in order. Of two ops with the same request and the same answer,
//     the one that was sent no later and answered no later goes first:
//     swapping their places changes no state and keeps both inside their
//     windows. (32 expiries of one sweep were 2³² orders to porcupine.)
//   - Earliest deadline first. Among the ops that may come next, the one
//     whose answer came soonest is tried first.
//
// And it never has the last word on its own: the order it finds is checked
// again from scratch (certify) before a history is called linearizable.
// When it finds none, or runs out of its share of the budget, porcupine
// decides, as before.

// linearize looks for an order of history's ops, from init, that every
// answer agrees with, until deadline (zero: none). It returns the order
// (indexes into history), or nil with done = true when there is none, or
// nil with done = false when it ran out of time.
func linearize(init State, history []porcupine.Operation, deadline time.Time) (order []int, done bool) {
	s := newSearch(init, history)
	return s.run(deadline)
}

// search is linearize's state: the ops placed so far, in order, and the
// states the model may be in after them (a set: an unknown outcome forks it).
type search struct {
	ops    []porcupine.Operation
	twin   []int // the op that must be placed before this one, or -1
	read   bits  // ops that never change the state
	byCall []int // op indexes by call time
	byRet  []int // op indexes by answer time
	placed bits
	count  int
	states []State
	stack  []placement
	// seen is every (changing ops placed, states) the search has been in,
	// with the reads placed then: it never comes back to one with no more
	// reads placed than before (fewer reads placed is never easier).
	seen map[uint64][]visit
}

// placement is one op placed: the states before it, and for an op chosen
// among others, the candidates it was chosen from and the next to try.
type placement struct {
	op     int
	states []State
	forced bool
	cands  []int
	next   int
}

type visit struct {
	changing, reads bits
	states          []State
}

func newSearch(init State, history []porcupine.Operation) *search {
	n := len(history)
	s := &search{ops: history, twin: make([]int, n), read: newBits(n), placed: newBits(n),
		states: []State{init}, seen: map[uint64][]visit{}}
	type class struct {
		in  input
		out output
	}
	twins := map[class][]int{}
	for i, op := range history {
		s.twin[i] = -1
		in, out := op.Input.(input), op.Output.(output)
		if readOnly(in, out) {
			s.read.set(i)
		}
		twins[class{in, out}] = append(twins[class{in, out}], i)
	}
	for _, ids := range twins {
		sort.SliceStable(ids, func(a, b int) bool {
			x, y := history[ids[a]], history[ids[b]]
			if x.Call != y.Call {
				return x.Call < y.Call
			}
			return x.Return < y.Return
		})
		for k := 1; k < len(ids); k++ {
			if history[ids[k-1]].Return <= history[ids[k]].Return {
				s.twin[ids[k]] = ids[k-1]
			}
		}
	}
	s.byCall = make([]int, n)
	for i := range s.byCall {
		s.byCall[i] = i
	}
	sort.SliceStable(s.byCall, func(a, b int) bool { return history[s.byCall[a]].Call < history[s.byCall[b]].Call })
	s.byRet = append([]int(nil), s.byCall...)
	sort.SliceStable(s.byRet, func(a, b int) bool { return history[s.byRet[a]].Return < history[s.byRet[b]].Return })
	return s
}

// readOnly reports whether an op with this request and answer never
// changes the state (it may still rule states out).
func readOnly(in input, out output) bool {
	switch in.kind {
	case Read:
		return true
	case Sale:
		return out.outcome != Sold && out.outcome != Unknown
	case Restock, Return:
		return out.outcome != Sold && out.outcome != Unknown
	}
	return false
}

func (s *search) run(deadline time.Time) ([]int, bool) {
	n := len(s.ops)
	var cands []int
	next, fresh := 0, true
	for steps := 1; ; steps++ {
		if steps%256 == 0 && !deadline.IsZero() && time.Now().After(deadline) {
			return nil, false
		}
		if s.count == n {
			order := make([]int, len(s.stack))
			for i, p := range s.stack {
				order[i] = p.op
			}
			return order, true
		}
		if fresh {
			if i := s.forcedRead(); i >= 0 {
				s.push(placement{op: i, states: s.states, forced: true}, s.states)
				continue
			}
			cands, next, fresh = s.candidates(), 0, false
		}
		if s.tryFrom(cands, &next) {
			fresh = true
			continue
		}
		// Nothing fits here: undo up to the last op chosen among others,
		// and try its next candidate.
		for {
			if len(s.stack) == 0 {
				return nil, true
			}
			top := s.pop()
			if !top.forced {
				cands, next = top.cands, top.next
				break
			}
		}
	}
}

// tryFrom places the first of cands, from *next on, that the states allow
// and that leads somewhere the search has not been; it reports whether it
// placed one.
func (s *search) tryFrom(cands []int, next *int) bool {
	for *next < len(cands) {
		i := cands[*next]
		*next++
		op := s.ops[i]
		after := stepAll(s.states, op.Input.(input), op.Output.(output))
		if len(after) == 0 {
			continue
		}
		s.placed.set(i)
		fresh := s.remember(after)
		s.placed.clear(i)
		if !fresh {
			continue
		}
		s.push(placement{op: i, states: s.states, cands: cands, next: *next}, after)
		return true
	}
	return false
}

func (s *search) push(p placement, after []State) {
	s.stack = append(s.stack, p)
	s.placed.set(p.op)
	s.count++
	s.states = after
}

func (s *search) pop() placement {
	p := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	s.placed.clear(p.op)
	s.count--
	s.states = p.states
	return p
}

// remember records the search being in states with the ops placed now,
// and reports false when it has been there before with at least these
// reads placed.
func (s *search) remember(states []State) bool {
	changing, reads := s.placed.split(s.read)
	k := changing.hash()
	for _, st := range states {
		k = (k^uint64(st.Stock))*1099511628211 ^ uint64(st.Round)
	}
	for _, v := range s.seen[k] {
		if v.changing.equal(changing) && sameStates(v.states, states) && v.reads.covers(reads) {
			return false
		}
	}
	s.seen[k] = append(s.seen[k], visit{changing: changing, reads: reads, states: states})
	return true
}

// callable is every op not yet placed that may come next: sent before the
// earliest answer among the ops not placed (no op answered before it was
// sent is still waiting).
func (s *search) callable(yield func(int) bool) {
	limit := int64(1<<63 - 1)
	for _, i := range s.byRet {
		if !s.placed.has(i) {
			limit = s.ops[i].Return
			break
		}
	}
	for _, i := range s.byCall {
		if s.ops[i].Call > limit {
			return
		}
		if !s.placed.has(i) && !yield(i) {
			return
		}
	}
}

// forcedRead is a callable read that holds in every state the search may
// be in, or -1.
func (s *search) forcedRead() int {
	found := -1
	s.callable(func(i int) bool {
		if !s.read.has(i) {
			return true
		}
		in, out := s.ops[i].Input.(input), s.ops[i].Output.(output)
		for _, st := range s.states {
			if next := step(st, in, out); len(next) != 1 || next[0].(State) != st {
				return true
			}
		}
		found = i
		return false
	})
	return found
}

// candidates are the callable ops whose earlier twin is placed, the
// earliest answered first.
func (s *search) candidates() []int {
	var c []int
	s.callable(func(i int) bool {
		if t := s.twin[i]; t < 0 || s.placed.has(t) {
			c = append(c, i)
		}
		return true
	})
	sort.SliceStable(c, func(a, b int) bool { return s.ops[c[a]].Return < s.ops[c[b]].Return })
	return c
}

// certify checks order from scratch: every op of history exactly once, no
// op before one that was answered before it was sent, and every answer
// possible in the states the ops before it lead to from init.
func certify(init State, history []porcupine.Operation, order []int) error {
	if len(order) != len(history) {
		return fmt.Errorf("the order has %d ops, the history %d", len(order), len(history))
	}
	seen := newBits(len(history))
	states := []State{init}
	var lastCall int64
	for k, i := range order {
		if i < 0 || i >= len(history) || seen.has(i) {
			return fmt.Errorf("op %d is not in the history once", i)
		}
		seen.set(i)
		op := history[i]
		if k > 0 && op.Return < lastCall {
			return fmt.Errorf("op %d (answered at %d) placed after an op sent at %d", i, op.Return, lastCall)
		}
		lastCall = max(lastCall, op.Call)
		if states = stepAll(states, op.Input.(input), op.Output.(output)); len(states) == 0 {
			return fmt.Errorf("op %d: %s is impossible where it is placed", i, describe(op.Input.(input), op.Output.(output)))
		}
	}
	return nil
}

// stepAll is every state one op with this answer can lead to from any of
// states, sorted, each once.
func stepAll(states []State, in input, out output) []State {
	var next []State
	for _, st := range states {
		for _, n := range step(st, in, out) {
			next = append(next, n.(State))
		}
	}
	sort.Slice(next, func(i, j int) bool {
		if next[i].Round != next[j].Round {
			return next[i].Round < next[j].Round
		}
		return next[i].Stock < next[j].Stock
	})
	out2 := next[:0]
	for i, st := range next {
		if i == 0 || st != next[i-1] {
			out2 = append(out2, st)
		}
	}
	return out2
}

func sameStates(a, b []State) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bits is a set of op indexes.
type bits []uint64

func newBits(n int) bits { return make(bits, (n+63)/64) }

func (b bits) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bits) clear(i int)    { b[i/64] &^= 1 << (i % 64) }
func (b bits) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

func (b bits) equal(c bits) bool {
	for i := range b {
		if b[i] != c[i] {
			return false
		}
	}
	return true
}

// covers reports whether every op in c is in b.
func (b bits) covers(c bits) bool {
	for i := range b {
		if c[i]&^b[i] != 0 {
			return false
		}
	}
	return true
}

// split divides b into the ops that are not in mask and those that are.
func (b bits) split(mask bits) (out, in bits) {
	out, in = make(bits, len(b)), make(bits, len(b))
	for i := range b {
		out[i], in[i] = b[i]&^mask[i], b[i]&mask[i]
	}
	return out, in
}

func (b bits) hash() uint64 {
	h := uint64(14695981039346656037)
	for _, w := range b {
		h = (h ^ w) * 1099511628211
	}
	return h
}
