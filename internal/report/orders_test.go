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
