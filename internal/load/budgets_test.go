package load

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// run is one fake result of a one-strategy row: sales per second over a
// one-second run, and the figures --ceilings measured beside it.
func run(strategy string, safe bool, sales, hotRow, soldOut, soldOutHealthz, p99 float64) Result {
	return Result{Strategy: strategy, Safe: safe, OK: int64(sales), Seconds: 1, HotRowRate: hotRow,
		SoldOutRate: soldOut, SoldOutHealthz: soldOutHealthz, LatencyMs: Latency{P99: p99}}
}

// many is run with several products.
func many(strategy string, sales float64) Result {
	r := run(strategy, true, sales, 0, 0, 0, 200)
	r.Products = []ProductResult{{Product: "p-1"}, {Product: "p-2"}}
	return r
}

// budgetKey names a budget in a test's want list.
type budgetKey struct{ name, strategy string }

func TestRunBudgets(t *testing.T) {
	hotRow := "sales/s ÷ hot row (fastest safe)"
	healthz := "sales/s ÷ GET /healthz (fastest safe)"
	manyRows := "sales/s ÷ many rows (fastest safe)"
	soldOut := "sold-out 409/s ÷ GET /healthz"
	p99 := "p99 of a sale"
	type want struct {
		measured float64
		met      bool
		runs     int
	}
	tests := []struct {
		name    string
		c       Ceilings
		results []Result
		want    map[budgetKey]want
	}{
		{
			name: "one run: the fastest safe strategy against the hot row and /healthz; every sold-out phase; batch's p99",
			c:    Ceilings{HotRow: 999, Healthz: 10000},
			results: []Result{
				run("batch", true, 5000, 1000, 9500, 10000, 40),
				run("atomic", true, 600, 1200, 8000, 10000, 300),
				// Faster, but not safe: never the fastest safe.
				run("none", false, 9000, 1000, 0, 0, 10),
			},
			want: map[budgetKey]want{
				{hotRow, "batch"}:  {5, true, 1},
				{healthz, "batch"}: {0.5, true, 1},
				{soldOut, "batch"}: {0.95, true, 1},
				// 80% of /healthz: below 90%.
				{soldOut, "atomic"}: {0.8, false, 1},
				{p99, "batch"}:      {40, true, 1},
			},
		},
		{
			name: "medians over three runs, each against the hot row measured before it",
			c:    Ceilings{HotRow: 500, Healthz: 10000},
			results: []Result{
				run("batch", true, 3000, 1000, 9000, 10000, 30),
				run("batch", true, 4500, 1500, 8000, 10000, 70),
				run("batch", true, 4000, 800, 9800, 10000, 60),
			},
			want: map[budgetKey]want{
				// 3.0, 3.0 and 5.0 × the hot row: the median 3.0, not 4500/500.
				{hotRow, "batch"}: {3, false, 3},
				// The median sales, 4000, of 10000.
				{healthz, "batch"}: {0.4, false, 3},
				{soldOut, "batch"}: {0.9, true, 3},
				{p99, "batch"}:     {60, false, 3},
			},
		},
		{
			name: "a run without its own hot row is compared with the one measured at the start",
			c:    Ceilings{HotRow: 1000},
			results: []Result{
				run("handoff", true, 4000, 0, 0, 0, 80),
			},
			want: map[budgetKey]want{
				{hotRow, "handoff"}: {4, true, 1},
			},
		},
		{
			name: "several products: the fastest safe strategy against the many-row ceiling, not the hot row; no p99 budget off the hot product",
			c:    Ceilings{HotRow: 1000, Healthz: 10000, ManyRows: 4000},
			results: []Result{
				many("batch", 5000),
				many("atomic", 1500),
			},
			want: map[budgetKey]want{
				{manyRows, "batch"}: {1.25, true, 1},
			},
		},
		{
			name: "mix and switch rows, unsafe rows and runs of no length are no strategy's",
			c:    Ceilings{HotRow: 1000, Healthz: 10000},
			results: []Result{
				{Strategy: RowMix, Safe: true, OK: 9000, Seconds: 1},
				{Strategy: RowSwitch, Safe: true, OK: 9000, Seconds: 1},
				run("setnx", false, 9000, 1000, 9000, 10000, 1),
				{Strategy: "batch", Safe: true, OK: 9000},
			},
			want: map[budgetKey]want{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RunBudgets(tt.c, tt.results)
			seen := map[budgetKey]bool{}
			for _, b := range got {
				k := budgetKey{b.Name, b.Strategy}
				seen[k] = true
				w, ok := tt.want[k]
				if !ok {
					t.Errorf("RunBudgets(%+v, …) judged %q for %q (%v), want no such budget", tt.c, b.Name, b.Strategy, b.Measured)
					continue
				}
				if math.Abs(b.Measured-w.measured) > 1e-9 || b.Met != w.met || b.Runs != w.runs {
					t.Errorf("RunBudgets: %q for %q = %v (met %v, %d runs), want %v (met %v, %d runs)",
						b.Name, b.Strategy, b.Measured, b.Met, b.Runs, w.measured, w.met, w.runs)
				}
			}
			for k := range tt.want {
				if !seen[k] {
					t.Errorf("RunBudgets(%+v, …) has no %q for %q, want one", tt.c, k.name, k.strategy)
				}
			}
		})
	}
}

func TestCPUBudgets(t *testing.T) {
	got := CPUBudgets([]CPUSale{
		{Strategy: "atomic", PerSecond: 500, XHealthz: 36, Safe: true},
		{Strategy: "redis", PerSecond: 200, XHealthz: 4.5, Safe: true, Lock: true},
		{Strategy: "batch", PerSecond: 4800, XHealthz: 3.2, Safe: true},
		// Faster and cheaper, but not safe: not judged.
		{Strategy: "setnx", PerSecond: 9000, XHealthz: 1, Safe: false, Lock: true},
		// Not measured against /healthz: not judged.
		{Strategy: "pglock", PerSecond: 100, Safe: true, Lock: true},
	})
	want := []Budget{
		{Name: "fleet CPU per sale ÷ per GET /healthz (fastest safe)", Strategy: "batch", Measured: 3.2, Target: BudgetCPUFastest, AtMost: true, Unit: "×", Runs: 1, Met: false},
		{Name: "fleet CPU per sale ÷ per GET /healthz (lock strategy)", Strategy: "redis", Measured: 4.5, Target: BudgetCPULock, AtMost: true, Unit: "×", Runs: 1, Met: true},
	}
	if len(got) != len(want) {
		t.Fatalf("CPUBudgets(…) = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("CPUBudgets(…)[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPrintBudgets(t *testing.T) {
	var b bytes.Buffer
	PrintBudgets(&b, "budgets:", nil)
	if b.Len() != 0 {
		t.Errorf("PrintBudgets(none) wrote %q, want nothing", b.String())
	}
	PrintBudgets(&b, "budgets:", []Budget{
		newBudget("sales/s ÷ hot row (fastest safe)", "batch", 3.1, BudgetHotRow, false, "×", 3),
		newBudget("sold-out 409/s ÷ GET /healthz", "atomic", 0.93, BudgetSoldOut, false, "%", 3),
		newBudget("p99 of a sale", "batch", 38.4, BudgetBatchP99, true, "ms", 3),
	})
	out := b.String()
	for _, want := range []string{"budgets:", "measured", "target", "3.10×", "≥ 4.00×", "NOT MET", "93%", "≥ 90%", "38 ms", "≤ 50 ms", "met"} {
		if !strings.Contains(out, want) {
			t.Errorf("PrintBudgets output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("\n%s", out)
}
