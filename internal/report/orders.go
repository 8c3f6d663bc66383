package report

import (
	"fmt"
	"io"
)

// PrintOrders prints, for a run with holds (--hold), what its orders came
// to, read from Postgres once every held order had ended: how many were
// held and how each ended, the units that came back, and the expiries
// later than the sweep's bound after their deadline.
func PrintOrders(w io.Writer, r Report) {
	first := true
	for _, res := range r.Results {
		o := res.Orders
		if o == nil {
			continue
		}
		if first {
			fmt.Fprintf(w, "\norders (pay within %s; an expiry is late past its deadline + %s):\n", o.PayWithin, o.SweepBound)
			fmt.Fprintf(w, "  %-12s %4s %6s %6s %9s %7s %8s %7s %8s %9s %9s %8s %6s\n", "row", "run", "held", "paid", "cancelled", "expired",
				"refunded", "shipped", "returned", "late exp.", "max lag", "pay 409", "steps")
			first = false
		}
		fmt.Fprintf(w, "  %-12s %4d %6d %6d %9d %7d %8d %7d %8d %9d %7.0fms %8d %6d\n", res.Strategy, res.Run, o.Held, o.Paid, o.Cancelled,
			o.Expired, o.Refunded, o.Shipped, o.UnitsReturned, o.LateExpiries, o.MaxExpiryLagMs, o.PayExpired, o.Steps)
		if o.StillHeld > 0 {
			fmt.Fprintf(w, "  %-12s      %d orders still held when the run stopped waiting\n", "", o.StillHeld)
		}
	}
}
