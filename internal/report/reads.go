package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// PrintReads prints, for a run with anonymous readers (--readers), what
// they got beside each row's sales, so that reads starving sales shows as
// a p99 or 503s that rise with the readers.
func PrintReads(w io.Writer, r Report) {
	first := true
	for _, res := range r.Results {
		if res.Reads == nil {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nreads beside the sales (anonymous GET /live?since=0 and GET /products/{id}):")
			fmt.Fprintf(w, "  %-12s %4s %8s %8s %10s %8s  %s\n", "row", "run", "readers", "reads/s", "sales p99", "503s", "reads refused")
			first = false
		}
		refused := "none"
		if len(res.Reads.Failed) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(res.Reads.Failed)) {
				parts = append(parts, fmt.Sprintf("%s ×%d", k, res.Reads.Failed[k]))
			}
			refused = strings.Join(parts, ", ")
		}
		fmt.Fprintf(w, "  %-12s %4d %8d %8.0f %8.1fms %8d  %s\n", res.Strategy, res.Run, res.Reads.Readers, res.Reads.PerSec, res.LatencyMs.P99, res.Unavailable, refused)
	}
}
