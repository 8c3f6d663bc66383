package load

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Issue 38's budgets: what a sale may cost, each a ratio of two figures
// measured in one run on one machine, met or not. RunBudgets judges a
// load-test run with --ceilings; CPUBudgets judges `loadtest cpu`.
const (
	// BudgetHotRow: the fastest safe strategy's sales per second on one
	// hot product, as a multiple of the hot-row ceiling (HotRowRate).
	BudgetHotRow = 4.0
	// BudgetHealthz: the same sales per second as a share of GET /healthz
	// answers through the target (Ceilings.Healthz).
	BudgetHealthz = 0.5
	// BudgetManyRows: with several products, the fastest safe strategy's
	// sales per second as a share of the many-row ceiling (ManyRowsRate).
	BudgetManyRows = 1.0
	// BudgetSoldOut: each safe strategy's sold-out answers per second as a
	// share of GET /healthz measured beside them (SoldOutPhase).
	BudgetSoldOut = 0.9
	// BudgetBatchP99 is the longest p99 of a batch sale, in milliseconds.
	BudgetBatchP99 = 50.0
	// BudgetCPUFastest: the fastest strategy's fleet CPU per sale as a
	// multiple of its CPU per GET /healthz.
	BudgetCPUFastest = 2.0
	// BudgetCPULock: every lock strategy's fleet CPU per sale as a
	// multiple of its CPU per GET /healthz, at 64 buyers.
	BudgetCPULock = 5.0
)

// Budget is one budget judged: what was measured, the target, and whether
// it is met. Ratios are plain (0.5 is 50%); Unit says how they print.
type Budget struct {
	// Name says what is compared with what, e.g. "batch sales/s ÷ hot row".
	Name     string `json:"name"`
	Strategy string `json:"strategy,omitempty"`
	// Measured is the ratio (or, for a latency, the milliseconds): the
	// median over Runs runs.
	Measured float64 `json:"measured"`
	Target   float64 `json:"target"`
	// AtMost is true when Measured must not pass Target (a cost, a
	// latency); else it must reach it.
	AtMost bool `json:"at_most,omitempty"`
	// Unit is how Measured and Target print: "×", "%" or "ms".
	Unit string `json:"unit"`
	Runs int    `json:"runs"`
	Met  bool   `json:"met"`
}

// newBudget judges measured against target.
func newBudget(name, strategy string, measured, target float64, atMost bool, unit string, runs int) Budget {
	met := measured >= target
	if atMost {
		met = measured <= target
	}
	return Budget{Name: name, Strategy: strategy, Measured: measured, Target: target, AtMost: atMost, Unit: unit, Runs: runs, Met: met}
}

// RunBudgets judges the one-strategy rows of a run with --ceilings
// against c: on one hot product, the fastest safe strategy's sales per
// second against the hot-row ceiling measured just before each of its
// runs (c.HotRow when a run has none) and against GET /healthz; with
// several products, against the many-row ceiling; each safe strategy's
// sold-out answers against GET /healthz beside them; batch's p99 on one
// hot product. Each
// figure is the median over the strategy's runs; a budget whose figures
// were not measured is left out.
func RunBudgets(c Ceilings, results []Result) []Budget {
	type runs struct {
		sales, timesHotRow, soldOut, p99 []float64
		many                             bool
	}
	byStrategy := map[string]*runs{}
	var order []string
	for _, r := range results {
		if !r.Safe || r.Strategy == RowMix || r.Strategy == RowSwitch || r.Seconds <= 0 {
			continue
		}
		s := byStrategy[r.Strategy]
		if s == nil {
			s = &runs{}
			byStrategy[r.Strategy] = s
			order = append(order, r.Strategy)
		}
		sales := float64(r.OK) / r.Seconds
		s.sales = append(s.sales, sales)
		s.many = s.many || len(r.Products) > 0
		if hot := cmp.Or(r.HotRowRate, c.HotRow); hot > 0 {
			s.timesHotRow = append(s.timesHotRow, sales/hot)
		}
		if r.SoldOutRate > 0 && r.SoldOutHealthz > 0 {
			s.soldOut = append(s.soldOut, r.SoldOutRate/r.SoldOutHealthz)
		}
		if r.LatencyMs.P99 > 0 {
			s.p99 = append(s.p99, r.LatencyMs.P99)
		}
	}
	var out []Budget
	fastest := ""
	for _, name := range order {
		if fastest == "" || median(byStrategy[name].sales) > median(byStrategy[fastest].sales) {
			fastest = name
		}
	}
	if f := byStrategy[fastest]; f != nil {
		sales := median(f.sales)
		switch {
		case f.many && c.ManyRows > 0:
			out = append(out, newBudget("sales/s ÷ many rows (fastest safe)", fastest, sales/c.ManyRows, BudgetManyRows, false, "%", len(f.sales)))
		case !f.many:
			if len(f.timesHotRow) > 0 {
				out = append(out, newBudget("sales/s ÷ hot row (fastest safe)", fastest, median(f.timesHotRow), BudgetHotRow, false, "×", len(f.timesHotRow)))
			}
			if c.Healthz > 0 {
				out = append(out, newBudget("sales/s ÷ GET /healthz (fastest safe)", fastest, sales/c.Healthz, BudgetHealthz, false, "%", len(f.sales)))
			}
		}
	}
	for _, name := range order {
		if s := byStrategy[name]; len(s.soldOut) > 0 {
			out = append(out, newBudget("sold-out 409/s ÷ GET /healthz", name, median(s.soldOut), BudgetSoldOut, false, "%", len(s.soldOut)))
		}
	}
	// Under the hot-product load: with several products a batch holds
	// fewer sales, and the budget is not about that.
	if s := byStrategy["batch"]; s != nil && !s.many && len(s.p99) > 0 {
		out = append(out, newBudget("p99 of a sale", "batch", median(s.p99), BudgetBatchP99, true, "ms", len(s.p99)))
	}
	return out
}

// CPUSale is one strategy's sale as `loadtest cpu` measured it: its
// answers per second, its fleet CPU per sale as a multiple of GET
// /healthz's (0: not measured), and what the strategy is.
type CPUSale struct {
	Strategy  string
	PerSecond float64
	XHealthz  float64
	Safe      bool
	// Lock is whether a sale takes a lock of a lock backend.
	Lock bool
}

// CPUBudgets judges the safe sales of a `loadtest cpu` run: the fastest
// one's fleet CPU per sale at most BudgetCPUFastest × GET /healthz's, and
// every lock strategy's at most BudgetCPULock ×.
func CPUBudgets(sales []CPUSale) []Budget {
	var out []Budget
	fastest := -1
	for i, s := range sales {
		if s.Safe && s.XHealthz > 0 && (fastest < 0 || s.PerSecond > sales[fastest].PerSecond) {
			fastest = i
		}
	}
	if fastest >= 0 {
		out = append(out, newBudget("fleet CPU per sale ÷ per GET /healthz (fastest safe)", sales[fastest].Strategy, sales[fastest].XHealthz, BudgetCPUFastest, true, "×", 1))
	}
	for _, s := range sales {
		if s.Safe && s.Lock && s.XHealthz > 0 {
			out = append(out, newBudget("fleet CPU per sale ÷ per GET /healthz (lock strategy)", s.Strategy, s.XHealthz, BudgetCPULock, true, "×", 1))
		}
	}
	return out
}

// PrintBudgets writes the budgets under title as a table: each one's
// name, strategy, measured figure, target, runs, and met / not met.
// Nothing for none.
func PrintBudgets(w io.Writer, title string, budgets []Budget) {
	if len(budgets) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n", title)
	table := [][]string{{"budget", "strategy", "measured", "target", "runs", "verdict"}}
	for _, b := range budgets {
		cmp := "≥ "
		if b.AtMost {
			cmp = "≤ "
		}
		verdict := "met"
		if !b.Met {
			verdict = "NOT MET"
		}
		table = append(table, []string{b.Name, b.Strategy, formatBudget(b.Measured, b.Unit), cmp + formatBudget(b.Target, b.Unit), fmt.Sprint(b.Runs), verdict})
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
			switch i {
			case 0, 1, 5: // words left, figures right
				b.WriteString(c + pad)
			default:
				b.WriteString(pad + c)
			}
			if i < len(cells)-1 {
				b.WriteString("  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// formatBudget prints v in unit: "3.1×", "48%", "38 ms".
func formatBudget(v float64, unit string) string {
	switch unit {
	case "%":
		return fmt.Sprintf("%.0f%%", 100*v)
	case "ms":
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

// median is the middle of v (the mean of the two middles for an even
// count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
