package report

import (
	_ "embed"
	"fmt"
	"inventory/internal/load"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/components"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// echartsJS is Apache ECharts 5.6.0 (Apache License 2.0, see
// assets/echarts-LICENSE), inlined into every report so that it opens
// offline: go-echarts would load it from a CDN.
//
//go:embed assets/echarts-5.6.0.min.js
var echartsJS string

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

func renderHTML(w io.Writer, rep *Report, m *Matrix) error {
	page := components.NewPage()
	page.SetPageTitle("inventory load test")
	if rep != nil && len(rep.Results) > 0 {
		page.AddCharts(salesOverTime(rep), latencies(rep), finalStock(rep), perReplicaSplit(rep), breaches(rep))
		if slices.ContainsFunc(rep.Results, func(r load.Result) bool { return len(r.Products) > 0 }) {
			page.AddCharts(hottestProducts(rep))
		}
	}
	if m != nil && len(m.Cells) > 0 {
		page.AddCharts(faultHeatMap(m))
	}
	// Offline: no CDN, the script inlined in the page's head.
	page.ClearPresetJSAssets()
	page.ClearPresetCSSAssets()
	page.AddCustomizedHeaders("<script>" + echartsJS + "</script>")
	return page.Render(w)
}

// rowLabel names a row of the table: the strategy, and the run when there are several.
func rowLabel(rep *Report, r load.Result) string {
	if rep.Runs > 1 {
		return fmt.Sprintf("%s #%d", r.Strategy, r.Run)
	}
	return r.Strategy
}

func chartOpts(title, subtitle string) []charts.GlobalOpts {
	return []charts.GlobalOpts{
		charts.WithInitializationOpts(opts.Initialization{Width: "1000px", Height: "420px"}),
		charts.WithTitleOpts(opts.Title{Title: title, Subtitle: subtitle}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "bottom"}),
	}
}

func salesOverTime(rep *Report) *charts.Line {
	line := charts.NewLine()
	line.SetGlobalOptions(chartOpts("Sales per second over time", "2xx answers per 100 ms of each row's run, as a rate")...)
	longest := 0
	for _, r := range rep.Results {
		longest = max(longest, len(r.Timeline))
	}
	x := make([]string, longest)
	for i := range x {
		x[i] = fmt.Sprintf("%.1fs", (time.Duration(i) * load.Tick).Seconds())
	}
	line.SetXAxis(x)
	perSecond := float64(time.Second / load.Tick)
	for _, r := range rep.Results {
		data := make([]opts.LineData, len(r.Timeline))
		for i, n := range r.Timeline {
			data[i] = opts.LineData{Value: float64(n) * perSecond}
		}
		line.AddSeries(rowLabel(rep, r), data)
	}
	return line
}

// barOf is a bar chart with one bar per row of the table.
func barOf(rep *Report, title, subtitle string) *charts.Bar {
	bar := charts.NewBar()
	bar.SetGlobalOptions(chartOpts(title, subtitle)...)
	var x []string
	for _, r := range rep.Results {
		x = append(x, rowLabel(rep, r))
	}
	bar.SetXAxis(x)
	return bar
}

func values(rep *Report, f func(load.Result) any) []opts.BarData {
	var out []opts.BarData
	for _, r := range rep.Results {
		out = append(out, opts.BarData{Value: f(r)})
	}
	return out
}

func latencies(rep *Report) *charts.Bar {
	bar := barOf(rep, "Latency seen by the buyers (ms)", "p50, p95 and p99 through nginx")
	bar.AddSeries("p50", values(rep, func(r load.Result) any { return r.LatencyMs.P50 })).
		AddSeries("p95", values(rep, func(r load.Result) any { return r.LatencyMs.P95 })).
		AddSeries("p99", values(rep, func(r load.Result) any { return r.LatencyMs.P99 }))
	return bar
}

func finalStock(rep *Report) *charts.Bar {
	bar := barOf(rep, "Final stock and oversold units", "below zero: sold what was not there")
	bar.AddSeries("final stock", values(rep, func(r load.Result) any { return r.FinalStock })).
		AddSeries("oversold", values(rep, func(r load.Result) any { return r.Oversold }))
	return bar
}

func perReplicaSplit(rep *Report) *charts.Bar {
	bar := barOf(rep, "Answers per replica", "which replica answered each buyer (X-Instance)")
	replicas := map[string]bool{}
	for _, r := range rep.Results {
		for name := range r.PerReplica {
			replicas[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(replicas)) {
		bar.AddSeries(name, values(rep, func(r load.Result) any { return r.PerReplica[name] }))
	}
	bar.SetSeriesOptions(charts.WithBarChartOpts(opts.BarChart{Stack: "replicas"}))
	return bar
}

func breaches(rep *Report) *charts.Bar {
	bar := barOf(rep, "Lock breaches caught by the database", "answers flagged lock_breach: the lock broke, the guarded, fenced write was refused")
	bar.AddSeries("breaches", values(rep, func(r load.Result) any { return r.Breaches }))
	return bar
}

// hottestShown is how many products the per-product chart shows.
const hottestShown = 10

// hottestProducts is the spread of a many-product run (--products): the
// 2xx of each row on the hottest products, and how many buyers picked
// each (the same demand for every row of a run).
func hottestProducts(rep *Report) *charts.Bar {
	bar := charts.NewBar()
	bar.SetGlobalOptions(chartOpts("Sales on the hottest products", fmt.Sprintf("2xx per product, the first %d of the Zipf choice (product 1 the hottest); buyers: how many picked it", hottestShown))...)
	var ids []string
	var buyers []opts.BarData
	for _, r := range rep.Results {
		if len(r.Products) == 0 {
			continue
		}
		if ids == nil {
			for _, p := range r.Products[:min(hottestShown, len(r.Products))] {
				ids = append(ids, p.Product)
				buyers = append(buyers, opts.BarData{Value: p.Buyers})
			}
			bar.SetXAxis(ids)
			label := "buyers"
			if rep.Runs > 1 {
				label = fmt.Sprintf("buyers (run %d)", r.Run)
			}
			bar.AddSeries(label, buyers)
		}
		var data []opts.BarData
		for _, p := range r.Products[:min(len(ids), len(r.Products))] {
			data = append(data, opts.BarData{Value: p.OK})
		}
		bar.AddSeries(rowLabel(rep, r), data)
	}
	return bar
}

// faultHeatMap is the fault matrix: one cell per strategy × fault, coloured
// by the share of faulted runs that kept every invariant.
func faultHeatMap(m *Matrix) *charts.HeatMap {
	hm := charts.NewHeatMap()
	hm.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{Width: "1000px", Height: fmt.Sprintf("%dpx", 120+40*len(m.Strategies))}),
		charts.WithTitleOpts(opts.Title{Title: "What survives what", Subtitle: fmt.Sprintf("share of faulted runs (N=%d) that kept every invariant; grey: the fault does not apply", m.Runs)}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true)}),
		charts.WithVisualMapOpts(opts.VisualMap{Calculable: opts.Bool(true), Min: 0, Max: 1,
			InRange: &opts.VisualMapInRange{Color: []string{"#cf222e", "#bf8700", "#1a7f37"}}}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: m.Faults}),
	)
	var rows []string
	for _, s := range m.Strategies {
		label := s.Name
		if !s.Safe {
			label += " (unsafe)"
		}
		rows = append(rows, label)
	}
	hm.SetXAxis(m.Faults)
	hm.SetGlobalOptions(charts.WithYAxisOpts(opts.YAxis{Type: "category", Data: rows}))
	var data []opts.HeatMapData
	for _, c := range m.Cells {
		x, y := indexOf(m.Faults, c.Fault), indexOf(names(m.Strategies), c.Strategy)
		if c.NotApplicable != "" || c.Runs == 0 {
			data = append(data, opts.HeatMapData{Name: "n/a", Value: [3]any{x, y, "-"}})
			continue
		}
		data = append(data, opts.HeatMapData{Name: c.Short(), Value: [3]any{x, y, float64(c.Kept) / float64(c.Runs)}})
	}
	hm.AddSeries("kept", data, charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Formatter: "{b}"}))
	return hm
}

func names(ss []StrategyInfo) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// AbsPath is path made absolute for the "report:" line, or path itself.
func AbsPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
