package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// echartsJS is Apache ECharts 5.6.0 (Apache License 2.0, see
// assets/echarts-LICENSE), inlined into every report so that it opens
// offline.
//
//go:embed assets/echarts-5.6.0.min.js
var echartsJS string

//go:embed assets/report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("report").Parse(pageTemplate))

// WriteHTML writes a self-contained report of rep (the load test's rows,
// when it has any) and m (the fault matrix, when not nil) to path.
func WriteHTML(path string, rep *Report, m *Matrix) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := renderHTML(f, rep, m); err != nil {
		_ = f.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return f.Close()
}

// pageData is what the page's template shows: the verdicts and settings
// first, then the charts, then the fault matrix.
type pageData struct {
	Title    string
	ECharts  template.JS
	Verdicts []verdictRow
	Notes    []string
	Settings [][2]string
	Charts   []chart
	Matrix   *matrixTable
	// ChartsJSON is the charts' ECharts options, drawn by the page's script.
	ChartsJSON template.JS
}

// verdictRow is one row of the verdict table.
type verdictRow struct {
	Label, Safe, Verdict, Class   string
	Sold, Oversold, OK, SoldOut   string
	Unavailable, ReqPerS, P99, Of string
}

// chart is one ECharts chart: a title over a div the page's script draws
// Option into.
type chart struct {
	ID       string         `json:"id"`
	Title    string         `json:"-"`
	Subtitle string         `json:"-"`
	Height   int            `json:"-"`
	Option   map[string]any `json:"option"`
}

func renderHTML(w io.Writer, rep *Report, m *Matrix) error {
	d := pageData{Title: "inventory load test", ECharts: template.JS(echartsJS), Charts: []chart{}}
	if rep != nil && len(rep.Results) > 0 {
		d.Verdicts, d.Notes = verdictRows(rep)
		d.Settings = settings(rep)
		d.Charts = append(d.Charts, salesOverTime(rep), latencies(rep), finalStock(rep), perReplicaSplit(rep), breaches(rep))
		if slices.ContainsFunc(rep.Results, func(r load.Result) bool { return len(r.Products) > 0 }) {
			d.Charts = append(d.Charts, hottestProducts(rep))
		}
	}
	if m != nil && len(m.Cells) > 0 {
		if rep == nil {
			d.Title = "inventory fault matrix"
		}
		d.Matrix = newMatrixTable(m)
	}
	for i := range d.Charts {
		d.Charts[i].ID = fmt.Sprintf("chart-%d", i+1)
	}
	js, err := json.Marshal(d.Charts)
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	d.ChartsJSON = template.JS(js)
	return page.Execute(w, d)
}

// rowLabel names a row of the table: the strategy, and the run when there are several.
func rowLabel(rep *Report, r load.Result) string {
	if rep.Runs > 1 {
		return fmt.Sprintf("%s #%d", r.Strategy, r.Run)
	}
	return r.Strategy
}

// verdictClass is the CSS class a verdict is shown with: a safe
// strategy's failure stands out, an unsafe one's oversell is expected.
func verdictClass(r load.Result) string {
	switch r.Verdict {
	case verdict.Safe:
		return "safe"
	case verdict.Broken, verdict.OrdersBroken, verdict.NotLinearizable, verdict.Inconclusive, verdict.Stuck:
		return "failed"
	case verdict.Undersold:
		return "undersold"
	case verdict.NoOversell:
		return "lucky"
	}
	return "expected"
}

func verdictRows(rep *Report) ([]verdictRow, []string) {
	var rows []verdictRow
	var notes []string
	for _, r := range rep.Results {
		safe := "no"
		if r.Safe {
			safe = "yes"
		}
		rows = append(rows, verdictRow{
			Label: rowLabel(rep, r), Safe: safe, Verdict: r.Verdict, Class: verdictClass(r),
			Sold: fmt.Sprint(r.LedgerUnits), Of: fmt.Sprint(r.Initial), Oversold: fmt.Sprint(r.Oversold),
			OK: fmt.Sprint(r.OK), SoldOut: fmt.Sprint(r.SoldOut), Unavailable: fmt.Sprint(r.Unavailable),
			ReqPerS: fmt.Sprintf("%.0f", r.Throughput), P99: fmt.Sprintf("%.1f", r.LatencyMs.P99),
		})
		for _, reason := range r.Reasons {
			notes = append(notes, fmt.Sprintf("%s %s: %s", rowLabel(rep, r), r.Verdict, reason))
		}
		if r.Breaches > 0 {
			notes = append(notes, fmt.Sprintf("%s: lock broke %d time%s, the database caught every one (guarded, fenced write refused)",
				rowLabel(rep, r), r.Breaches, plural(int(r.Breaches), "", "s")))
		}
		if o := r.Orders; o != nil {
			notes = append(notes, fmt.Sprintf("%s: %s; %d expiries later than %s after their deadline (latest %.0f ms)",
				rowLabel(rep, r), Comeback(r), o.LateExpiries, o.SweepBound, o.MaxExpiryLagMs))
		}
	}
	return rows, notes
}

// settings are the run's settings, as the page lists them.
func settings(rep *Report) [][2]string {
	target := rep.Target
	if rep.LocalFleet {
		target = "a local fleet (Postgres with fsync on, Redis, 2 replicas, nginx) at " + rep.Target
	}
	s := [][2]string{
		{"started", rep.StartedAt},
		{"commit", cmp(rep.Commit, "unknown")},
		{"target", target},
	}
	if line := unverifiedLine(rep.Results); line != "" {
		s = append(s, [2]string{"verdicts", line})
	} else if len(rep.Results) > 0 && !slices.ContainsFunc(rep.Results, func(r load.Result) bool { return r.StateFrom != load.FromPostgres }) {
		s = append(s, [2]string{"verdicts", "verified: each run's state read from the fleet's Postgres"})
	}
	if rep.Products > 1 {
		s = append(s, [2]string{"products", fmt.Sprintf("%d (%s-1 … %s-%d), %d in stock each; buyers pick one by Zipf s=%g", rep.Products, rep.Product, rep.Product, rep.Products, rep.Stock, rep.Zipf)})
	} else {
		s = append(s, [2]string{"product", fmt.Sprintf("%s, %d in stock", rep.Product, rep.Stock)})
	}
	s = append(s,
		[2]string{"buyers", fmt.Sprintf("%d per row, 1 unit each, %d at a time", rep.Buyers, rep.Concurrency)},
		[2]string{"runs", fmt.Sprint(rep.Runs)},
		[2]string{"work delay", rep.WorkDelay},
	)
	if rep.LockTTL != "" {
		s = append(s, [2]string{"lock TTL", rep.LockTTL})
	}
	var scenarios []string
	if rep.Mix {
		scenarios = append(scenarios, "mix (every safe strategy sells one product at once)")
	}
	if rep.RestockDuring {
		scenarios = append(scenarios, "restocked during each run")
	}
	if rep.SwitchEvery > 0 {
		scenarios = append(scenarios, fmt.Sprintf("switch (the default switched every %d answers)", rep.SwitchEvery))
	}
	if len(scenarios) > 0 {
		s = append(s, [2]string{"scenarios", strings.Join(scenarios, "; ")})
	}
	if rep.OrdersAfter != "" {
		s = append(s, [2]string{"orders", rep.OrdersAfter})
	}
	return s
}

func cmp(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// palette and dashes tell up to 16 rows apart by colour and by dash
// pattern both, so that two lines stay apart where colours are hard to
// tell apart (and in black and white).
var (
	palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
		"#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#e7969c", "#6b6ecf", "#bd9e39"}
	dashes = []any{"solid", []int{8, 4}, []int{2, 3}, []int{12, 3, 3, 3}}
)

// lineStyle is row i's colour and dash.
func lineStyle(i int) map[string]any {
	return map[string]any{"color": palette[i%len(palette)], "type": dashes[(i+i/len(palette))%len(dashes)], "width": 2}
}

// base is what every chart's option shares: the tooltip, and a legend
// under the plot that wraps onto as many lines as it needs.
func base(trigger string) map[string]any {
	return map[string]any{
		"animation": false,
		"tooltip":   map[string]any{"trigger": trigger},
		"legend":    map[string]any{"bottom": 0, "left": "center", "type": "plain"},
		"grid":      map[string]any{"left": 8, "right": 32, "top": 32, "bottom": 72, "containLabel": true},
	}
}

func salesOverTime(rep *Report) chart {
	perSecond := float64(time.Second / load.Tick)
	var series []map[string]any
	for i, r := range rep.Results {
		data := make([][2]float64, len(r.Timeline))
		for j, n := range r.Timeline {
			data[j] = [2]float64{(time.Duration(j) * load.Tick).Seconds(), float64(n) * perSecond}
		}
		series = append(series, map[string]any{"name": rowLabel(rep, r), "type": "line", "data": data, "showSymbol": false,
			"lineStyle": lineStyle(i), "itemStyle": map[string]any{"color": palette[i%len(palette)]},
			"emphasis": map[string]any{"focus": "series"}})
	}
	o := base("axis")
	o["grid"].(map[string]any)["bottom"] = 24 + 24*((len(rep.Results)+5)/6)
	o["xAxis"] = map[string]any{"type": "value", "name": "s", "min": 0}
	o["yAxis"] = map[string]any{"type": "value", "name": "sales/s"}
	o["series"] = series
	return chart{Title: "Sales per second over time", Subtitle: "2xx answers per 100 ms of each row's run, as a rate; every row has a colour and a dash of its own (hover a line or its name to pick it out)",
		Height: 380 + 24*((len(rep.Results)+5)/6), Option: o}
}

// barsOf is a horizontal bar chart with one category per row of the
// table, every row's name shown, the first on top.
func barsOf(rep *Report, title, subtitle string, series ...map[string]any) chart {
	var names []string
	for _, r := range rep.Results {
		names = append(names, rowLabel(rep, r))
	}
	o := base("axis")
	o["tooltip"].(map[string]any)["axisPointer"] = map[string]any{"type": "shadow"}
	o["xAxis"] = map[string]any{"type": "value"}
	o["yAxis"] = map[string]any{"type": "category", "data": names, "inverse": true, "axisLabel": map[string]any{"interval": 0}}
	o["series"] = series
	perRow := 14 + 8*len(series)
	if series[0]["stack"] != nil {
		perRow = 24
	}
	return chart{Title: title, Subtitle: subtitle, Height: 110 + perRow*len(names), Option: o}
}

// bars is a bar series named name of f's figure of every row.
func bars(rep *Report, name, colour string, f func(load.Result) any) map[string]any {
	var data []any
	for _, r := range rep.Results {
		data = append(data, f(r))
	}
	return map[string]any{"name": name, "type": "bar", "data": data, "itemStyle": map[string]any{"color": colour}}
}

func latencies(rep *Report) chart {
	return barsOf(rep, "Latency seen by the buyers (ms)", "p50, p95 and p99 through nginx",
		bars(rep, "p50", "#9ecae1", func(r load.Result) any { return r.LatencyMs.P50 }),
		bars(rep, "p95", "#4292c6", func(r load.Result) any { return r.LatencyMs.P95 }),
		bars(rep, "p99", "#08519c", func(r load.Result) any { return r.LatencyMs.P99 }))
}

func finalStock(rep *Report) chart {
	return barsOf(rep, "Final stock and oversold units", "below zero: sold what was not there",
		bars(rep, "final stock", "#6e7781", func(r load.Result) any { return r.FinalStock }),
		bars(rep, "oversold", "#cf222e", func(r load.Result) any { return r.Oversold }))
}

func perReplicaSplit(rep *Report) chart {
	replicas := map[string]bool{}
	for _, r := range rep.Results {
		for name := range r.PerReplica {
			replicas[name] = true
		}
	}
	var series []map[string]any
	for i, name := range slices.Sorted(maps.Keys(replicas)) {
		s := bars(rep, name, palette[i%len(palette)], func(r load.Result) any { return r.PerReplica[name] })
		s["stack"] = "replicas"
		series = append(series, s)
	}
	if len(series) == 0 {
		series = append(series, bars(rep, "answers", palette[0], func(r load.Result) any { return r.OK + r.SoldOut + r.Unavailable + r.Errors }))
	}
	return barsOf(rep, "Answers per replica", "which replica answered each buyer (X-Instance)", series...)
}

func breaches(rep *Report) chart {
	return barsOf(rep, "Lock breaches caught by the database", "answers flagged lock_breach: the lock broke, the guarded, fenced write was refused",
		bars(rep, "breaches", "#bf8700", func(r load.Result) any { return r.Breaches }))
}

// hottestShown is how many products the per-product chart shows.
const hottestShown = 10

// hottestProducts is the spread of a many-product run (--products): the
// 2xx of each row on the hottest products, and how many buyers picked
// each (the same demand for every row of a run).
func hottestProducts(rep *Report) chart {
	var ids []string
	var series []map[string]any
	for i, r := range rep.Results {
		if len(r.Products) == 0 {
			continue
		}
		if ids == nil {
			var buyers []int64
			for _, p := range r.Products[:min(hottestShown, len(r.Products))] {
				ids = append(ids, p.Product)
				buyers = append(buyers, p.Buyers)
			}
			label := "buyers"
			if rep.Runs > 1 {
				label = fmt.Sprintf("buyers (run %d)", r.Run)
			}
			series = append(series, map[string]any{"name": label, "type": "bar", "data": buyers, "itemStyle": map[string]any{"color": "#d0d7de"}})
		}
		var data []int64
		for _, p := range r.Products[:min(len(ids), len(r.Products))] {
			data = append(data, p.OK)
		}
		series = append(series, map[string]any{"name": rowLabel(rep, r), "type": "bar", "data": data, "itemStyle": map[string]any{"color": palette[i%len(palette)]}})
	}
	o := base("axis")
	o["xAxis"] = map[string]any{"type": "category", "data": ids, "axisLabel": map[string]any{"interval": 0, "rotate": 30}}
	o["yAxis"] = map[string]any{"type": "value"}
	o["series"] = series
	return chart{Title: "Sales on the hottest products",
		Subtitle: fmt.Sprintf("2xx per product, the first %d of the Zipf choice (product 1 the hottest); buyers: how many picked it", hottestShown),
		Height:   440, Option: o}
}

// matrixTable is the fault matrix as the page shows it: a row per
// strategy, a column per fault, each cell labelled and coloured by what
// happened.
type matrixTable struct {
	Runs   int
	Faults []string
	Rows   []matrixRow
	Notes  []string
}

type matrixRow struct {
	Name  string
	Safe  bool
	Cells []matrixCell
}

type matrixCell struct {
	Text, Class, Title string
}

func newMatrixTable(m *Matrix) *matrixTable {
	cells := map[[2]string]Cell{}
	for _, c := range m.Cells {
		cells[[2]string{c.Strategy, c.Fault}] = c
	}
	t := &matrixTable{Runs: m.Runs, Faults: m.Faults}
	for _, s := range m.Strategies {
		row := matrixRow{Name: s.Name, Safe: s.Safe}
		for _, f := range m.Faults {
			c, ok := cells[[2]string{s.Name, f}]
			mc := matrixCell{Text: c.Short(), Title: c.Summary()}
			switch {
			case !ok:
				mc = matrixCell{Text: "-", Class: "na", Title: "not run"}
			case c.NotApplicable != "":
				mc.Class = "na"
			case c.NotStruck != "":
				mc.Class, mc.Title = "notstruck", c.NotStruck
			case c.SafeBroke:
				mc.Class, mc.Text = "failed", mc.Text+" "+brokeLabel(c.Failing)
			case c.Kept < c.Runs:
				mc.Class = "expected"
			default:
				mc.Class = "safe"
			}
			row.Cells = append(row.Cells, mc)
		}
		t.Rows = append(t.Rows, row)
	}
	for _, c := range m.Cells {
		for _, r := range c.Results {
			if kept(r.Result) {
				continue
			}
			t.Notes = append(t.Notes, brokenRun(c.Strategy, c.Fault, c.Safe, r.Run, r.Verdict, r.Reasons))
		}
	}
	return t
}

// AbsPath is path made absolute for the "report:" line, or path itself.
func AbsPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
