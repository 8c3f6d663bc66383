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
	"math"
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
	if err := renderHTML(f, filepath.Dir(path), rep, m); err != nil {
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
	// Histories are the links to porcupine's pages of the products whose
	// history no order explains, shown with HistoryLegend.
	Histories []historyLink
	// ChartsJSON is the charts' ECharts options, drawn by the page's script.
	ChartsJSON template.JS
	// HistoryLegend is how to read the history pages (HistoryLegend).
	HistoryLegend string
}

// verdictRow is one row of the verdict table. Unsafe rows carry a Note
// under their verdict ("unsafe — not caught this run").
type verdictRow struct {
	Label, Verdict, Class, Note   string
	Unsafe                        bool
	Sold, Oversold, OK, SoldOut   string
	Unavailable, ReqPerS, P99, Of string
}

// chart is one ECharts chart: a title over a div the page's script draws
// Option into; or, when Empty is set, the title over that one line
// instead (a chart with nothing to draw, as a run without lock breaches).
type chart struct {
	ID       string         `json:"id"`
	Title    string         `json:"-"`
	Subtitle string         `json:"-"`
	Height   int            `json:"-"`
	Option   map[string]any `json:"option"`
	Empty    string         `json:"-"`
}

// renderHTML writes the page to w; dir is the directory it is written in,
// which the links to the history pages are relative to.
func renderHTML(w io.Writer, dir string, rep *Report, m *Matrix) error {
	d := pageData{Title: "inventory load test", ECharts: template.JS(echartsJS), Charts: []chart{}, HistoryLegend: HistoryLegend}
	if rep != nil && len(rep.Results) > 0 {
		d.Verdicts, d.Notes = verdictRows(rep)
		d.Histories = historyLinks(dir, rep)
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
	drawn := []chart{}
	for i := range d.Charts {
		d.Charts[i].ID = fmt.Sprintf("chart-%d", i+1)
		if d.Charts[i].Empty == "" {
			drawn = append(drawn, d.Charts[i])
		}
	}
	js, err := json.Marshal(drawn)
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

// verdictClass is the CSS class a verdict is shown with: a failure stands
// out; otherwise an unsafe strategy is coloured as unsafe whatever this
// run's luck (from its safe flag, not its outcome: setnx's NO OVERSELL
// must not read as fine).
func verdictClass(r load.Result) string {
	switch r.Verdict {
	case verdict.Broken, verdict.OrdersBroken, verdict.NotLinearizable, verdict.Inconclusive, verdict.Stuck:
		return "failed"
	}
	switch {
	case !r.Safe:
		return "unsafe"
	case r.Verdict == verdict.Safe:
		return "safe"
	case r.Verdict == verdict.Undersold:
		return "undersold"
	}
	return "expected"
}

// unsafeNote is what an unsafe strategy's verdict means, under it: it was
// caught this run, or it was not (and is unsafe all the same).
func unsafeNote(r load.Result) string {
	if r.Safe {
		return ""
	}
	switch r.Verdict {
	case verdict.Oversold:
		return "unsafe — caught overselling"
	case verdict.LostUpdates:
		return "unsafe — caught losing updates"
	case verdict.NoOversell:
		return "unsafe — not caught this run"
	}
	return "unsafe"
}

func verdictRows(rep *Report) ([]verdictRow, []string) {
	var rows []verdictRow
	var notes []string
	for _, r := range rep.Results {
		rows = append(rows, verdictRow{
			Label: rowLabel(rep, r), Unsafe: !r.Safe, Verdict: r.Verdict, Class: verdictClass(r), Note: unsafeNote(r),
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

// palette colours the bars of the per-replica and per-product charts.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
	"#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#e7969c", "#6b6ecf", "#bd9e39"}

// The colours of a row in the sales panels: a safe strategy, an unsafe
// one (whatever its verdict), a safe one that failed.
const (
	safeColour   = "#0969da"
	unsafeColour = "#bc4c00"
	failedColour = "#cf222e"
)

// rowColour is row r's colour in the sales panels.
func rowColour(r load.Result) string {
	switch verdictClass(r) {
	case "failed":
		return failedColour
	case "unsafe":
		return unsafeColour
	}
	return safeColour
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

// The sales panels' layout: panels per line, and each panel's plot height
// and the room above it for its title (px).
const (
	panelColumns = 4
	panelPlot    = 110
	panelTitle   = 46
)

// salesOverTime is sales per second over time as small multiples: a
// panel per row, each with its own rate axis, all on one time axis. One
// plot of 16 lines (the old chart) let the ~190/s lock strategies overlap
// under batch's and none's 2,800/s spikes; a log axis would keep them
// overlapping (and cannot draw the 0 of a sold-out product). In its own
// panel every line fills its height, the shared time axis still shows
// who sold out first, and each panel's title gives its average and peak
// rates, so magnitudes compare by number. Colours say safe (blue), unsafe
// (orange, whatever its luck) or failed (red).
func salesOverTime(rep *Report) chart {
	const title = "Sales per second over time"
	perSecond := float64(time.Second / load.Tick)
	end := 0.0
	for _, r := range rep.Results {
		end = max(end, (time.Duration(len(r.Timeline)) * load.Tick).Seconds())
	}
	if end == 0 {
		return chart{Title: title, Empty: "no sales timeline in this report"}
	}
	var grids, xAxes, yAxes, titles, series []map[string]any
	lines := (len(rep.Results) + panelColumns - 1) / panelColumns
	width := 100.0 / panelColumns
	for i, r := range rep.Results {
		col, line := i%panelColumns, i/panelColumns
		top := line*(panelPlot+panelTitle) + panelTitle
		data := make([][2]float64, len(r.Timeline))
		peak, last := 0.0, 0
		for j, n := range r.Timeline {
			rate := float64(n) * perSecond
			data[j] = [2]float64{(time.Duration(j) * load.Tick).Seconds(), rate}
			peak = max(peak, rate)
			if n > 0 {
				last = j + 1
			}
		}
		name := rowLabel(rep, r)
		if !r.Safe {
			name += " (unsafe)"
		}
		sub := "no sales"
		if last > 0 {
			took := (time.Duration(last) * load.Tick).Seconds()
			sub = fmt.Sprintf("%s sold in %.1f s: %s/s on average, peak %s/s", thousands(r.OK), took, thousands(int64(float64(r.OK)/took+0.5)), thousands(int64(peak+0.5)))
		}
		colour := rowColour(r)
		titles = append(titles, map[string]any{"text": name, "subtext": sub, "left": fmt.Sprintf("%.2f%%", float64(col)*width+0.5), "top": top - panelTitle + 2,
			"itemGap": 2, "textStyle": map[string]any{"fontSize": 13, "color": colour}, "subtextStyle": map[string]any{"fontSize": 11, "color": "#57606a"}})
		grids = append(grids, map[string]any{"left": fmt.Sprintf("%.2f%%", float64(col)*width+0.5), "width": fmt.Sprintf("%.2f%%", width-2.5),
			"top": top, "height": panelPlot, "containLabel": true})
		x := map[string]any{"type": "value", "gridIndex": i, "min": 0, "max": math.Ceil(end), "splitNumber": 4,
			"axisLabel": map[string]any{"fontSize": 10}}
		if line == lines-1 || i+panelColumns >= len(rep.Results) {
			x["name"], x["nameGap"] = "s", 4
		}
		xAxes = append(xAxes, x)
		yAxes = append(yAxes, map[string]any{"type": "value", "gridIndex": i, "min": 0, "splitNumber": 2,
			"axisLabel": map[string]any{"fontSize": 10}})
		series = append(series, map[string]any{"name": rowLabel(rep, r), "type": "line", "xAxisIndex": i, "yAxisIndex": i, "data": data,
			"showSymbol": false, "lineStyle": map[string]any{"color": colour, "width": 1.5},
			"itemStyle": map[string]any{"color": colour}, "areaStyle": map[string]any{"color": colour, "opacity": 0.12}})
	}
	o := map[string]any{
		"animation": false,
		"tooltip":   map[string]any{"trigger": "axis"},
		"title":     titles,
		"grid":      grids,
		"xAxis":     xAxes,
		"yAxis":     yAxes,
		"series":    series,
	}
	return chart{Title: title,
		Subtitle: "2xx answers per 100 ms of each row's run, as a rate: a panel per row, each on its own rate axis (read its labels), all on the same time axis; blue safe, orange unsafe (whatever its luck this run), red a safe strategy that failed",
		Height:   lines*(panelPlot+panelTitle) + 16, Option: o}
}

// thousands is n with a comma between thousands: 2,800.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// barsOf is a horizontal bar chart with one category per row of the
// table, every row's name shown, the first on top; or, when every bar is
// zero, the line empty instead of an empty axis.
func barsOf(rep *Report, title, subtitle, empty string, series ...map[string]any) chart {
	if allZero(series) {
		return chart{Title: title, Empty: empty}
	}
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

// allZero reports whether every value of every series is zero.
func allZero(series []map[string]any) bool {
	for _, s := range series {
		for _, v := range s["data"].([]any) {
			switch n := v.(type) {
			case int64:
				if n != 0 {
					return false
				}
			case float64:
				if n != 0 {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
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
	return barsOf(rep, "Latency seen by the buyers (ms)", "p50, p95 and p99 through nginx", "no latencies were measured in this run",
		bars(rep, "p50", "#9ecae1", func(r load.Result) any { return r.LatencyMs.P50 }),
		bars(rep, "p95", "#4292c6", func(r load.Result) any { return r.LatencyMs.P95 }),
		bars(rep, "p99", "#08519c", func(r load.Result) any { return r.LatencyMs.P99 }))
}

func finalStock(rep *Report) chart {
	return barsOf(rep, "Final stock and oversold units", "below zero: sold what was not there",
		"every row ended with 0 in stock and nothing oversold",
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
	return barsOf(rep, "Answers per replica", "which replica answered each buyer (X-Instance)", "no answers in this run", series...)
}

func breaches(rep *Report) chart {
	return barsOf(rep, "Lock breaches caught by the database", "answers flagged lock_breach: the lock broke, the guarded, fenced write was refused",
		"no lock breaches in this run: no answer was flagged lock_breach",
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
