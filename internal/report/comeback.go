package report

import (
	"fmt"
	"io"

	"inventory/internal/load"
	"inventory/internal/verdict"
)

// SoldAgain is how many of the units that came back to a run's stock
// (cancelled, expired and refunded orders) the crowd bought again: the
// units taken from the stock in all (the ledger's, returned ones included)
// beyond its initial stock, at most the units that came back. One round
// only: a run with orders never restocks.
func SoldAgain(r load.Result) int64 {
	if r.Orders == nil {
		return 0
	}
	back := r.Orders.UnitsReturned
	return min(back, max(0, r.LedgerUnits+back-r.Initial))
}

// Comeback is the plain sentence of what a run with orders came to: the
// carts abandoned and cancelled, the units that came back and how many of
// them were sold again, and whether the stock ever went below zero (the
// verdict, read from Postgres and the history of answers); "" for a run
// without orders.
func Comeback(r load.Result) string {
	o := r.Orders
	if o == nil {
		return ""
	}
	s := fmt.Sprintf("%d orders held for %s: %d paid (%d then shipped, %d refunded), %d cancelled, %d expired (abandoned carts); "+
		"%d units returned to the stock, and the crowd bought %d of them again (%d left at the end)",
		o.Held, o.PayWithin, o.Paid+o.Shipped+o.Refunded, o.Shipped, o.Refunded, o.Cancelled, o.Expired, o.UnitsReturned, SoldAgain(r), r.FinalStock)
	switch {
	case r.Verdict == verdict.Safe:
		s += "; the stock never went below 0: " + r.Verdict + " (every order invariant held in Postgres"
		if r.History != nil {
			s += "; every answer, the returns included, " + r.History.Verdict
		}
		s += ")"
	default:
		s += "; verdict " + r.Verdict + " (its reasons are above)"
	}
	return s
}

// PrintComeback prints, under the orders table, Comeback for every run
// with orders.
func PrintComeback(w io.Writer, r Report) {
	for _, res := range r.Results {
		if line := Comeback(res); line != "" {
			fmt.Fprintf(w, "%s run %d: %s.\n", res.Strategy, res.Run, line)
		}
	}
}
