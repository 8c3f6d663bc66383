package report

import (
	"fmt"
	"io"
)

// legend is the two lines under the terminal's verdict table that say what
// its verdicts and columns mean, for a reader who has not read
// docs/loadtest.md (which explains every verdict and column). The same two
// lines whatever the rows, so that the README can show them as they are.
var legend = [2]string{
	"SAFE: no oversell, answers true · OVERSOLD: sold more than it had · NO OVERSELL: unsafe but lucky",
	"sold: ledger units/initial · 2xx sold, 409 sold out, 503 refused · final: stock left · p99 in ms",
}

// printLegend writes the legend.
func printLegend(w io.Writer) {
	for _, line := range legend {
		fmt.Fprintln(w, line)
	}
}
