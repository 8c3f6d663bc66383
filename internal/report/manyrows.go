package report

import (
	"fmt"
	"io"
)

// printManyRows prints, when the many-row ceiling was measured (several
// products), each run's sales per second as a share of it: how close the
// fleet comes to one-sale transactions straight to Postgres on as many
// rows.
func printManyRows(w io.Writer, r Report) {
	c := r.Ceilings
	if c == nil || c.ManyRows <= 0 {
		return
	}
	fmt.Fprintf(w, "\nagainst the many-row ceiling (%.0f transactions/s on %d products):\n", c.ManyRows, c.ManyRowsProducts)
	fmt.Fprintf(w, "%-10s %4s %9s %12s\n", "strategy", "run", "sales/s", "% many rows")
	for _, res := range r.Results {
		if res.Seconds <= 0 {
			continue
		}
		sales := float64(res.OK) / res.Seconds
		fmt.Fprintf(w, "%-10s %4d %9.0f %11.0f%%\n", res.Strategy, res.Run, sales, 100*sales/c.ManyRows)
	}
}
