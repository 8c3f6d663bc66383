package report

import (
	"bytes"
	"strings"
	"testing"

	"inventory/internal/load"
)

// TestSoldAgain: the units the crowd bought again are those taken from
// the stock beyond its initial, never more than came back, never fewer
// than none.
func TestSoldAgain(t *testing.T) {
	tests := []struct {
		name                      string
		initial, ledger, returned int64
		want                      int64
	}{
		{"every returned unit sold again", 250, 250, 100, 100},
		{"some sold again, the rest left", 250, 226, 103, 79},
		{"none sold again", 250, 150, 100, 0},
		{"nothing came back", 250, 250, 0, 0},
	}
	for _, tt := range tests {
		r := load.Result{Initial: tt.initial, LedgerUnits: tt.ledger, Orders: &load.OrdersResult{UnitsReturned: tt.returned}}
		if got := SoldAgain(r); got != tt.want {
			t.Errorf("%s: SoldAgain(initial %d, ledger %d, returned %d) = %d, want %d", tt.name, tt.initial, tt.ledger, tt.returned, got, tt.want)
		}
	}
	if got := SoldAgain(load.Result{Initial: 10, LedgerUnits: 10}); got != 0 {
		t.Errorf("SoldAgain(a run without orders) = %d, want 0", got)
	}
}

// TestComebackSaysItPlainly: a run with orders gets one sentence: the
// carts, the units that came back and were sold again, and the verdict
// with the history's; an unsafe or broken one says its verdict instead of
// claiming the stock held; a run without orders gets nothing.
func TestComebackSaysItPlainly(t *testing.T) {
	safe := load.Result{Strategy: "redis+orders", Run: 1, Verdict: "SAFE", Initial: 250, LedgerUnits: 226, FinalStock: 24,
		History: &load.History{Verdict: "LINEARIZABLE"},
		Orders:  &load.OrdersResult{PayWithin: "2s", Held: 154, Paid: 28, Shipped: 23, Refunded: 12, Cancelled: 26, Expired: 65, UnitsReturned: 103}}
	var b bytes.Buffer
	PrintComeback(&b, Report{Results: []load.Result{{Strategy: "none", Run: 1, Verdict: "OVERSOLD"}, safe}})
	out := b.String()
	for _, want := range []string{"redis+orders run 1: 154 orders held for 2s", "63 paid (23 then shipped, 12 refunded)", "26 cancelled",
		"65 expired (abandoned carts)", "103 units returned to the stock, and the crowd bought 79 of them again (24 left at the end)",
		"the stock never went below 0: SAFE", "LINEARIZABLE"} {
		if !strings.Contains(out, want) {
			t.Errorf("PrintComeback = %q, want it to contain %q", out, want)
		}
	}
	if strings.Contains(out, "none") {
		t.Errorf("PrintComeback = %q: a line for a run without orders", out)
	}
	broken := safe
	broken.Verdict = "ORDERS BROKEN"
	if got := Comeback(broken); strings.Contains(got, "never went below") || !strings.Contains(got, "verdict ORDERS BROKEN") {
		t.Errorf("Comeback(ORDERS BROKEN) = %q, want the verdict and no claim that the stock held", got)
	}
}
