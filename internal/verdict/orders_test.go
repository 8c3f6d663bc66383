package verdict

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestJudgeOrders: a run of 10 units with holds — 2 sold outright, 4 held
// of which one paid and shipped, one paid, one cancelled, one expired —
// is SAFE, and each case spoils one piece of the evidence read from
// Postgres or the buyers' step answers; each fails if its rule is taken
// out of Orders.Check.
func TestJudgeOrders(t *testing.T) {
	deadline := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := func(states ...string) []OrderEvent {
		out := make([]OrderEvent, len(states))
		for i, s := range states {
			out[i] = OrderEvent{State: s, At: deadline.Add(time.Duration(i-len(states)) * time.Second)}
		}
		return out
	}
	clean := func() Evidence {
		orders := []Order{
			{ID: "o-ship", Product: "p", Round: 1, Quantity: 1, State: StateShipped, ExpiresAt: deadline, Events: ev("held", "paid", "shipped")},
			{ID: "o-paid", Product: "p", Round: 1, Quantity: 1, State: StatePaid, ExpiresAt: deadline, Events: ev("held", "paid")},
			{ID: "o-cancel", Product: "p", Round: 1, Quantity: 1, State: StateCancelled, ExpiresAt: deadline, Events: ev("held", "cancelled"),
				Returns: 1, ReturnReason: StateCancelled},
			{ID: "o-exp", Product: "p", Round: 1, Quantity: 1, State: StateExpired, ExpiresAt: deadline,
				Events:  []OrderEvent{{State: "held", At: deadline.Add(-2 * time.Second)}, {State: "expired", At: deadline.Add(700 * time.Millisecond)}},
				Returns: 1, ReturnReason: StateExpired},
		}
		// 2 outright + 4 holds = 6 ledger rows; 2 units came back.
		return Evidence{
			Safe: true,
			Products: []Figures{{Product: "p", Buyers: 6, OK: 6, Final: 6,
				Rounds: []RoundFigures{{Round: 1, Current: true, Initial: 10, Units: 4, Rows: 6, OK: 6, Returned: 2}}}},
			History: checked("p"),
			Orders: &Orders{
				PayWithin: 2 * time.Second, SweepBound: 3 * time.Second,
				Rounds: []OrderRound{{Product: "p", Round: 1, Current: true, Initial: 10, Stock: 6, Outright: 2, Held: 0, Paid: 1, Shipped: 1,
					Returned: 2, Freed: 2}},
				Orders: orders,
				Steps: []StepAnswer{
					{Order: "o-paid", Step: "pay", Status: 200, State: StatePaid},
					{Order: "o-ship", Step: "pay", Status: 200, State: StateShipped},
					{Order: "o-cancel", Step: "cancel", Status: 200, State: StateCancelled},
					{Order: "o-exp", Step: "pay", Status: 409, Problem: "order-expired", State: StateExpired},
					{Order: "o-ship", Step: "refund", Status: 409, Problem: "order-state", State: StateShipped},
				},
			},
		}
	}
	for _, tc := range []struct {
		name    string
		spoil   func(e *Evidence)
		want    string
		because string
	}{
		{"a clean run with orders", func(*Evidence) {}, Safe, ""},
		{"more units out than the round had", func(e *Evidence) { e.Orders.Rounds[0].Outright = 9 },
			OrdersBroken, "9 units sold outright + 0 held + 1 paid + 1 shipped = 11 > initial 10"},
		{"a stock that is not initial less what is out", func(e *Evidence) { e.Orders.Rounds[0].Stock = 7 },
			OrdersBroken, "stock 7, want initial 10 − 4 sold, held, paid or shipped = 6"},
		{"an order's units returned twice", func(e *Evidence) { e.Orders.Orders[2].Returns = 2 },
			OrdersBroken, "order o-cancel (cancelled): its units returned 2 times"},
		{"a paid order's units returned", func(e *Evidence) { e.Orders.Orders[1].Returns, e.Orders.Orders[1].ReturnReason = 1, StateExpired },
			OrdersBroken, "order o-paid is paid but its units returned (expired)"},
		{"an expired order's units never returned", func(e *Evidence) { e.Orders.Orders[3].Returns = 0 },
			OrdersBroken, "order o-exp is expired but its units never returned"},
		{"a cancelled order returned as expired", func(e *Evidence) { e.Orders.Orders[2].ReturnReason = StateExpired },
			OrdersBroken, "order o-cancel is cancelled but its units returned as expired"},
		{"an order both paid and expired", func(e *Evidence) {
			o := &e.Orders.Orders[3]
			o.Events = ev("held", "paid", "expired")
		}, OrdersBroken, "order o-exp went from paid to expired"},
		{"an expiry past the sweep's bound", func(e *Evidence) { e.Orders.Orders[3].Events[1].At = deadline.Add(4 * time.Second) },
			OrdersBroken, "order o-exp expired 4s after its deadline, past the sweep's bound of 3s"},
		{"a pay answered 200 of an order never paid", func(e *Evidence) { e.Orders.Steps[0].Order = "o-cancel" },
			OrdersBroken, "a pay of order o-cancel was answered 200 with state paid, which the order never entered"},
		{"a pay answered order-expired of an order that was paid", func(e *Evidence) {
			e.Orders.Steps = append(e.Orders.Steps, StepAnswer{Order: "o-paid", Step: "pay", Status: 409, Problem: "order-expired"})
		}, OrdersBroken, "answered 409 order-expired, but the order was paid"},
		{"a pay answered order-expired of an order that never expired", func(e *Evidence) {
			e.Orders.Steps = append(e.Orders.Steps, StepAnswer{Order: "o-ship", Step: "pay", Status: 409, Problem: "order-expired"})
		}, OrdersBroken, "answered 409 order-expired, but the order was paid"},
		{"a step of an existing order answered 404", func(e *Evidence) {
			e.Orders.Steps = append(e.Orders.Steps, StepAnswer{Order: "o-paid", Step: "ship", Status: 404, Problem: "order-not-found"})
		}, OrdersBroken, "a ship of order o-paid was answered 404 order-not-found, but the order exists"},
		{"a step of an order Postgres does not have", func(e *Evidence) { e.Orders.Steps[0].Order = "o-none" },
			OrdersBroken, "Postgres has no such order of the run"},
		{"a held order that never ended", func(e *Evidence) { e.Orders.Unended = []string{"o-held"} },
			Stuck, "order o-held still held when the run stopped waiting"},
		{"the ledger's units count the returned ones back", func(e *Evidence) { e.Products[0].Rounds[0].Returned = 1 },
			Broken, "ledger has 5 units in 6 sales"},
		{"orders broken beats a history not linearizable", func(e *Evidence) {
			e.Orders.Orders[2].Returns = 2
			e.History.Verdict, e.History.Products[0].Verdict = "NOT LINEARIZABLE", "NOT LINEARIZABLE"
		}, OrdersBroken, "history of p not linearizable"},
	} {
		e := clean()
		tc.spoil(&e)
		got := Judge(e)
		if got.Verdict != tc.want {
			t.Errorf("%s: Judge = %s %q, want %s", tc.name, got.Verdict, got.Reasons, tc.want)
			continue
		}
		if tc.because != "" && !slices.ContainsFunc(got.Reasons, func(r string) bool { return strings.Contains(r, tc.because) }) {
			t.Errorf("%s: Judge reasons %q, want one containing %q", tc.name, got.Reasons, tc.because)
		}
	}
	if !Failing(OrdersBroken) {
		t.Errorf("Failing(%q) = false, want true", OrdersBroken)
	}
}

// TestSoldOutThenReturnedIsLeftToTheHistory: a 409 sold-out followed by an
// expiry that gave units back leaves stock above 0 with no broken
// invariant: whether the sold-out was true is the history check's to say.
func TestSoldOutThenReturnedIsLeftToTheHistory(t *testing.T) {
	e := Evidence{
		Safe: true,
		Products: []Figures{{Product: "p", Buyers: 12, OK: 10, SoldOut: 2, LateSoldOut: 2, LateTurnedAway: 2, Final: 1,
			Rounds: []RoundFigures{{Round: 1, Current: true, Initial: 10, Units: 9, Rows: 10, OK: 10, Returned: 1}}}},
		History: checked("p"),
	}
	if got := Judge(e); got.Verdict != Safe {
		t.Errorf("Judge = %s %q, want %s", got.Verdict, got.Reasons, Safe)
	}
	e.Products[0].Rounds[0].Returned, e.Products[0].Rounds[0].Units = 0, 10
	e.Products[0].Final = 0
	e.Products[0].Rounds[0].Initial = 11
	e.Products[0].Final = 1
	if got := Judge(e); got.Verdict != Broken {
		t.Errorf("without returns: Judge = %s %q, want %s (a sold-out with stock left)", got.Verdict, got.Reasons, Broken)
	}
}

// TestAnOversellReturnsHide: an unsafe strategy that took the stock to −6
// and then had units returned ends with its ledger under the initial
// stock; the answer that told −6 left still makes it OVERSOLD (and a safe
// one BROKEN). Without returns the measure is the ledger's, as before.
func TestAnOversellReturnsHide(t *testing.T) {
	low := int64(-6)
	e := Evidence{
		Products: []Figures{{Product: "p", Buyers: 30, OK: 30, Final: 2, LowestRemaining: &low,
			Rounds: []RoundFigures{{Round: 1, Current: true, Initial: 20, Units: 18, Rows: 30, OK: 30, Returned: 12}}}},
		History: checked("p"),
	}
	if got := Judge(e); got.Verdict != Oversold || got.Oversold != 6 {
		t.Errorf("unsafe: Judge = %s, oversold %d %q; want %s, 6", got.Verdict, got.Oversold, got.Reasons, Oversold)
	}
	e.Safe = true
	if got := Judge(e); got.Verdict != Broken || !slices.ContainsFunc(got.Reasons, func(r string) bool { return strings.Contains(r, "a sale answered -6 left") }) {
		t.Errorf("safe: Judge = %s %q; want %s naming the answer", got.Verdict, got.Reasons, Broken)
	}
	e.Safe = false
	e.Products[0].Rounds[0].Returned, e.Products[0].Rounds[0].Units, e.Products[0].Rounds[0].Rows = 0, 20, 20
	e.Products[0].OK, e.Products[0].Final = 20, 0
	if got := Judge(e); got.Verdict != NoOversell {
		t.Errorf("no returns: Judge = %s %q; want %s (the ledger's measure, as before)", got.Verdict, got.Reasons, NoOversell)
	}
}
