package cpuprof

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Report is one measurement: how it was run and a row per kind. Its JSON
// is what `loadtest cpu --json` writes and `loadtest results` records.
type Report struct {
	StartedAt string  `json:"started_at"` // RFC 3339, UTC
	Commit    string  `json:"commit"`
	Clients   int     `json:"clients"`
	Seconds   float64 `json:"seconds_each"`
	Warmup    float64 `json:"warmup_seconds"`
	Replicas  int     `json:"replicas"`
	// WorkDelay is the replicas' INVENTORY_WORK_DELAY.
	WorkDelay string `json:"work_delay"`
	// Fsync is whether Postgres flushed each commit.
	Fsync bool  `json:"fsync"`
	Rows  []Row `json:"rows"`
}

// columns are the table's CPU columns: group and title.
var columns = [][2]string{
	{GroupPostgres, "Postgres"},
	{GroupReplicas, "both replicas"},
	{GroupNginx, "nginx"},
	{GroupRedis, "Redis"},
	{GroupOther, "other servers"},
	{GroupGenerator, "load generator"},
	{GroupFleet, "fleet, no generator"},
}

// PrintTable writes the rows as a table: answers per second, and the µs
// of CPU per answer of each group.
func PrintTable(w io.Writer, rows []Row) {
	table := [][]string{{"answer", "answers/s"}}
	for _, c := range columns {
		table[0] = append(table[0], c[1])
	}
	table[0] = append(table[0], "× /healthz", "other answers")
	for _, r := range rows {
		cells := []string{r.Title, strconv.FormatFloat(r.PerSecond, 'f', 0, 64)}
		for _, c := range columns {
			cells = append(cells, strconv.FormatFloat(r.PerAnswer[c[0]], 'f', 1, 64))
		}
		x := "-"
		if r.XHealthz > 0 {
			x = strconv.FormatFloat(r.XHealthz, 'f', 2, 64)
		}
		table = append(table, append(cells, x, otherAnswers(r)))
	}
	width := make([]int, len(table[0]))
	for _, cells := range table {
		for i, c := range cells {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, cells := range table {
		var b strings.Builder
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0: // the answer's name, left; the figures, right
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// otherAnswers names the answers other than the kind's, by status:
// "503: 12", or "0".
func otherAnswers(r Row) string {
	if r.Unexpected == 0 {
		return "0"
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(r.Statuses)) {
		if n, err := strconv.Atoi(s); err != nil || !expected(r.Expected, n) {
			parts = append(parts, fmt.Sprintf("%s: %d", s, r.Statuses[s]))
		}
	}
	return strings.Join(parts, ", ")
}

// expected reports whether status is the one want names ("200", "2xx").
func expected(want string, status int) bool {
	if len(want) == 3 && strings.HasSuffix(want, "xx") {
		return strconv.Itoa(status/100) == want[:1]
	}
	return strconv.Itoa(status) == want
}
