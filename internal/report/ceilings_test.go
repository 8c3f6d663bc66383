package report

import (
	"inventory/internal/load"
	"strings"
	"testing"
)

// Each run is a multiple of the hot row measured just before it, not of the
// figure from the start of the command; the medians are the runs' medians.
func TestEachRunIsComparedWithItsOwnHotRow(t *testing.T) {
	rep := Report{
		Ceilings: &load.Ceilings{Seconds: 5, HotRow: 1000, HotRowClients: load.HotRowClients, Healthz: 10000},
		Results: []load.Result{
			{Strategy: "batch", Run: 1, OK: 3000, Seconds: 1, HotRowRate: 1000},
			{Strategy: "batch", Run: 2, OK: 3000, Seconds: 1, HotRowRate: 750},
			{Strategy: "batch", Run: 3, OK: 2000, Seconds: 1, HotRowRate: 500, SoldOutRate: 9000, SoldOutHealthz: 10000},
		},
	}
	var out strings.Builder
	PrintCeilings(&out, rep)
	lines := strings.Split(out.String(), "\n")
	var rows []string
	for _, line := range lines {
		if strings.HasPrefix(line, "batch") {
			rows = append(rows, strings.Join(strings.Fields(line), " "))
		}
	}
	want := []string{
		"batch 1 3000 1000 3.00 - - - -",
		"batch 2 3000 750 4.00 - - - -",
		"batch 3 2000 500 4.00 - - 9000 90%",
		"batch 3 3000 750 4.00 - - 9000 90%", // medians
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("PrintCeilings rows:\n%s\nwant:\n%s\nall:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"), out.String())
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{nil, 0}, {[]float64{0, 0}, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{0, 7, 9}, 8},
	} {
		if got := median(tc.v); got != tc.want {
			t.Errorf("median(%v) = %g, want %g", tc.v, got, tc.want)
		}
	}
}

// With the many-row ceiling measured, each run's sales per second are
// given as a share of it.
func TestRunsAgainstTheManyRowCeiling(t *testing.T) {
	rep := Report{
		Ceilings: &load.Ceilings{Seconds: 5, HotRow: 1000, HotRowClients: load.HotRowClients, Healthz: 10000,
			ManyRows: 4000, ManyRowsProducts: 1000, ManyRowsClients: 32},
		Results: []load.Result{{Strategy: "atomic", Run: 1, OK: 3000, Seconds: 1}},
	}
	var out strings.Builder
	PrintCeilings(&out, rep)
	for _, want := range []string{"many rows 4000 one-sale transactions/s (1000 products drawn uniformly, 32 clients", "% many rows"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("PrintCeilings says nothing of %q:\n%s", want, out.String())
		}
	}
	var row string
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "atomic" {
			row = strings.Join(f, " ")
		}
	}
	if row != "atomic 1 3000 75%" {
		t.Errorf("the atomic row against the many-row ceiling = %q, want %q\n%s", row, "atomic 1 3000 75%", out.String())
	}
}
