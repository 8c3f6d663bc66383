package report

import (
	"bytes"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"strings"
	"testing"

	"github.com/jedib0t/go-pretty/v6/text"
)

// TestTableHasATwoLineLegend: right under the terminal's table, two lines
// of at most 100 columns say what the verdicts SAFE, OVERSOLD and NO
// OVERSELL mean and what the columns sold, 2xx, 409, 503, final and p99
// are; the same lines under the wide table.
func TestTableHasATwoLineLegend(t *testing.T) {
	rep := Report{Runs: 1, Results: []load.Result{
		{Run: 1, Strategy: "none", Initial: 100, OK: 131, SoldOut: 19, FinalStock: -31, LedgerUnits: 131, Oversold: 31, Verdict: verdict.Oversold},
		{Run: 1, Strategy: "local", Initial: 100, OK: 100, SoldOut: 50, LedgerUnits: 100, Verdict: verdict.NoOversell},
		{Run: 1, Strategy: "redis", Safe: true, Initial: 100, OK: 100, SoldOut: 50, LedgerUnits: 100, Verdict: verdict.Safe},
	}}
	for _, wide := range []bool{false, true} {
		var buf bytes.Buffer
		PrintTable(&buf, rep, wide)
		lines := strings.Split(buf.String(), "\n")
		last := -1 // the table's last line: the last row's, or the wide table's bottom rule
		for i, line := range lines {
			if strings.Contains(line, "redis") || strings.HasPrefix(line, "└") {
				last = i
			}
		}
		if last < 0 || last+2 >= len(lines) {
			t.Fatalf("PrintTable(wide=%v): no table, or nothing under it:\n%s", wide, buf.String())
		}
		got := lines[last+1 : last+3]
		for i, line := range got {
			if n := text.StringWidthWithoutEscSequences(line); n > 100 {
				t.Errorf("PrintTable(wide=%v) legend line %d is %d columns wide, want at most 100: %s", wide, i+1, n, line)
			}
		}
		for _, want := range []string{verdict.Safe + ":", verdict.Oversold + ":", verdict.NoOversell + ": unsafe", "sold:", "2xx", "409", "503", "final:", "p99"} {
			if !strings.Contains(got[0]+"\n"+got[1], want) {
				t.Errorf("PrintTable(wide=%v): the two lines under the table lack %q:\n%s", wide, want, strings.Join(got, "\n"))
			}
		}
	}
}
