package report

import (
	"bytes"
	"strings"
	"testing"

	"inventory/internal/load"
)

// TestPrintOrders: a run with holds gets a line of its orders; a run
// without prints nothing, so the default output is as before.
func TestPrintOrders(t *testing.T) {
	var none bytes.Buffer
	PrintOrders(&none, Report{Results: []load.Result{{Strategy: "atomic", Run: 1}}})
	if none.Len() != 0 {
		t.Errorf("PrintOrders without orders printed %q, want nothing", none.String())
	}
	var b bytes.Buffer
	PrintOrders(&b, Report{Results: []load.Result{{Strategy: "redis", Run: 1, Orders: &load.OrdersResult{PayWithin: "2s", SweepBound: "32s",
		Held: 40, Paid: 10, Cancelled: 8, Expired: 12, Refunded: 4, Shipped: 6, UnitsReturned: 24, MaxExpiryLagMs: 950, PayExpired: 3, Steps: 70}}}})
	out := b.String()
	for _, want := range []string{"pay within 2s", "deadline + 32s", "redis", " 40 ", " 24 ", "950ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("PrintOrders = %q, want it to contain %q", out, want)
		}
	}
}

// TestHTMLShowsOrders: the HTML report notes a run's orders, and shows
// ORDERS BROKEN as a failure, not as an unsafe strategy's expected
// oversell.
func TestHTMLShowsOrders(t *testing.T) {
	rep := &Report{Product: "p", Stock: 10, Buyers: 20, Concurrency: 4, Runs: 1, Results: []load.Result{{Strategy: "redis", Run: 1, Safe: true,
		Verdict: "ORDERS BROKEN", Reasons: []string{"order o-1 is paid but its units returned (expired)"},
		Orders: &load.OrdersResult{PayWithin: "2s", SweepBound: "32s", Held: 7, Expired: 3, UnitsReturned: 3}}}}
	var b bytes.Buffer
	if err := renderHTML(&b, t.TempDir(), rep, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"7 orders held for 2s", "3 expired", "3 units returned"} {
		if !strings.Contains(out, want) {
			t.Errorf("the HTML report does not contain %q", want)
		}
	}
	if verdictClass(rep.Results[0]) != "failed" {
		t.Errorf("verdictClass(ORDERS BROKEN) = %q, want failed", verdictClass(rep.Results[0]))
	}
}
