package report

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"inventory/internal/history"
	"inventory/internal/load"
)

// historyCell is a row's history verdict, short, and how long its check
// took, e.g. "LIN 0.02s", "NOT LIN 1.3s", "INCONCL 30s"; "-" when unchecked.
func historyCell(h *load.History) string {
	if h == nil {
		return "-"
	}
	short := map[string]string{
		string(history.Linearizable): "LIN", string(history.NotLinearizable): "NOT LIN", string(history.Inconclusive): "INCONCL",
	}[h.Verdict]
	if short == "" {
		short = h.Verdict
	}
	return fmt.Sprintf("%s %s", short, seconds(h.Seconds))
}

func seconds(s float64) string {
	switch {
	case s < 0.1:
		return fmt.Sprintf("%.2fs", s)
	case s < 10:
		return fmt.Sprintf("%.1fs", s)
	}
	return fmt.Sprintf("%.0fs", s)
}

// historyLines are what the table's notes say of a row's history beyond
// its reasons: each product whose check was inconclusive, and where each
// visualization of a product that failed was written.
func historyLines(h *load.History) []string {
	if h == nil {
		return nil
	}
	var out []string
	for _, p := range h.Products {
		switch {
		case p.Verdict == string(history.Inconclusive):
			out = append(out, fmt.Sprintf("%s INCONCLUSIVE after %s (%d ops): not checked, so not a pass (a safe row fails)", p.Product, seconds(p.Seconds), p.Ops))
		case p.Visualization != "":
			out = append(out, fmt.Sprintf("%s %s (%s), see %s", p.Product, p.Verdict, p.Violation, p.Visualization))
		}
	}
	return out
}

// historyNote says once, under the table, what the history column is and
// where the final state it was checked against came from.
func historyNote(results []load.Result) string {
	from := map[string]bool{}
	for _, r := range results {
		if r.History != nil {
			from[r.StateFrom] = true
		}
	}
	if len(from) == 0 {
		return ""
	}
	src := "Postgres"
	switch {
	case from[load.FromAPI] && from[load.FromPostgres]:
		src = "Postgres or, for some rows, the service's API"
	case from[load.FromAPI]:
		src = "the service's API (no Postgres given: --postgres-url)"
	}
	return "history: every answer checked against one sequential stock per product (porcupine; LIN = one order explains them all); state before and after read from " + src
}

// WriteHistoryPages writes porcupine's visualization of every product
// whose history was NOT LINEARIZABLE (at most 3 per row) to
// "<base>-<row>[-run<N>]-<product>.html", records the paths in the results
// and returns them.
func WriteHistoryPages(base string, rep *Report) ([]string, error) {
	var out []string
	for i := range rep.Results {
		res := &rep.Results[i]
		if res.History == nil {
			continue
		}
		row := res.Strategy
		if rep.Runs > 1 {
			row = fmt.Sprintf("%s-run%d", res.Strategy, res.Run)
		}
		paths, err := res.History.WriteVisualizations(func(product string) string {
			return fmt.Sprintf("%s-%s-%s.html", base, safeName(row), safeName(product))
		}, 3)
		out = append(out, paths...)
		if err != nil {
			return out, fmt.Errorf("history visualization: %w", err)
		}
	}
	return out, nil
}

// WriteMatrixHistoryPages is WriteHistoryPages for the fault matrix: one
// page per product NOT LINEARIZABLE, "<base>-<strategy>-<fault>-run<N>-<product>.html".
func WriteMatrixHistoryPages(base string, m *Matrix) ([]string, error) {
	var out []string
	for _, c := range m.Cells {
		for _, r := range c.Results {
			if r.History == nil {
				continue
			}
			paths, err := r.History.WriteVisualizations(func(product string) string {
				return fmt.Sprintf("%s-%s-%s-run%d-%s.html", base, safeName(c.Strategy), safeName(c.Fault), r.Run, safeName(product))
			}, 3)
			out = append(out, paths...)
			if err != nil {
				return out, fmt.Errorf("history visualization: %w", err)
			}
		}
	}
	return out, nil
}

// HistoryBase is where WriteHistoryPages writes beside a report: the
// --html or --json file without its extension, else dir/loadtest.
func HistoryBase(htmlOut, jsonOut, dir string) string {
	for _, p := range []string{htmlOut, jsonOut} {
		if p != "" && p != "-" {
			return strings.TrimSuffix(p, filepath.Ext(p))
		}
	}
	return filepath.Join(dir, "loadtest")
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }
