package report

import (
	"fmt"
	"html"
	"net/url"
	"os"
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

// HistoryLegend says how to read porcupine's page of a history, in one
// paragraph: the report shows it beside its links to the pages, and each
// page gets it above its drawing (its own legend names "Valid LP" and
// "Invalid LP" and nothing more).
const HistoryLegend = `A history page is porcupine's drawing of the history of one product whose answers the history check ` +
	`could not explain: every request of the run on it. Time runs left to right; each numbered line ("Clients") is one buyer, ` +
	`and the last line is the stock read from Postgres after the run. Each box is one request, from when it was sent to when ` +
	`its answer came, labelled with what it asked and what the answer said ("sell 1 → sold, 3 left"). The check looks for one ` +
	`order of all the requests, each taking effect at one instant inside its box (its linearization point, LP), in which a ` +
	`single stock, going down by each sale, gives every answer. Valid LP (grey ticks, joined in order): the longest such order ` +
	`found. Invalid LP (red): a request that could come next in time but whose answer contradicts the stock at that point ` +
	`(sold when the stock was already 0: the oversell). "jump to first error" scrolls to the first red one; hovering a box ` +
	`shows the stock before and after it in that order.`

// historyLink is one link of the report to a history page.
type historyLink struct {
	Row, Product, Violation, Href string
}

// historyLinks are the report's links to the history pages of rep's rows
// (the visualizations written by WriteHistoryPages), relative to dir, the
// report's directory, when they can be.
func historyLinks(dir string, rep *Report) []historyLink {
	var out []historyLink
	for _, r := range rep.Results {
		if r.History == nil {
			continue
		}
		for _, p := range r.History.Products {
			if p.Visualization == "" {
				continue
			}
			out = append(out, historyLink{Row: rowLabel(rep, r), Product: p.Product, Violation: cmp(p.Violation, p.Verdict), Href: linkTo(dir, p.Visualization)})
		}
	}
	return out
}

// linkTo is a link from a page in dir to the file path: relative when
// both are on one tree, else a file URL.
func linkTo(dir, path string) string {
	from, err1 := filepath.Abs(dir)
	to, err2 := filepath.Abs(path)
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(from, to); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(to)}).String()
}

// addHistoryLegend puts HistoryLegend at the top of the history page at
// path, above porcupine's own one-line legend.
func addHistoryLegend(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("history legend: %w", err)
	}
	page := string(b)
	at := strings.Index(page, "<body>")
	if at < 0 {
		return fmt.Errorf("history legend: %s has no <body>", path)
	}
	at += len("<body>")
	// Below porcupine's legend, which is fixed at the top of the window.
	legend := `<p id="inventory-legend" style="max-width:60rem;font:13px/1.4 system-ui,sans-serif;color:#1b1f24;margin:44px 10px 0">` +
		html.EscapeString(HistoryLegend) + `</p>`
	if err := os.WriteFile(path, []byte(page[:at]+"\n"+legend+page[at:]), 0o644); err != nil {
		return fmt.Errorf("history legend: %w", err)
	}
	return nil
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
		for _, p := range paths {
			if err := addHistoryLegend(p); err != nil {
				return out, err
			}
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
			for _, p := range paths {
				if err := addHistoryLegend(p); err != nil {
					return out, err
				}
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
