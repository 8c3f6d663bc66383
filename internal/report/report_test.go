package report

import (
	"bytes"
	"encoding/json"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jedib0t/go-pretty/v6/text"
)

func TestReportShowsEveryFigure(t *testing.T) {
	rep := Report{Runs: 2, Results: []load.Result{
		{Run: 1, Strategy: "none", OK: 1040, SoldOut: 460, FinalStock: -40, LedgerUnits: 1040, LedgerRows: 1040, Oversold: 40,
			PerReplica: map[string]int64{"inventory-2": 750, "inventory-1": 750}, Verdict: verdict.Oversold, Reasons: []string{"oversold 40 units"}},
		{Run: 2, Strategy: "none", Verdict: verdict.NoOversell},
		{Run: 1, Strategy: "atomic", Safe: true, OK: 1000, SoldOut: 500, LedgerUnits: 1000, LedgerRows: 1000,
			LatencyMs: load.Latency{P50: 1.25, P95: 7.5, P99: 12.25}, Throughput: 2345.6, Verdict: verdict.Safe},
		{Run: 1, Strategy: "redis", Safe: true, OK: 1498, SoldOut: 0, Unavailable: 4, Breaches: 5, Unknown: 2, Verdict: verdict.Safe,
			Rounds: []verdict.RoundResult{{Round: 7, Initial: 1000, LedgerUnits: 1000, LedgerRows: 1000, OK: 999}, {Round: 8, Current: true, Initial: 1000, LedgerUnits: 500, LedgerRows: 500, OK: 499}}},
		{Run: 1, Strategy: load.RowMix, Safe: true, Verdict: verdict.Broken, Reasons: []string{"round 9: oversold 1 unit: ledger 1001 > initial 1000"},
			PerStrategy: map[string]int64{"lua": 700, "redis": 800}, BrokenRounds: []int64{9},
			Rounds: []verdict.RoundResult{{Round: 9, Broken: true, Oversold: 1}, {Round: 10, Current: true}}},
		{Run: 1, Strategy: load.RowSwitch, Safe: true, Verdict: verdict.Safe, PerStrategy: map[string]int64{"atomic": 800, "redis": 700}, Switches: 29},
	}}
	var buf bytes.Buffer
	PrintTable(&buf, rep, true)
	out := buf.String()
	for _, want := range []string{
		"strategy", "2xx", "409", "503", "errors", "breaches", "final", "ledger", "oversold", "lost", "undersold", "rounds", "req/s", "p99 ms", "max ms", "per replica", "verdict",
		"7 8", "9 10 (broken: 9)",
		"redis (run 1): lock broke 5 times, the database caught 5 (guarded, fenced write refused), oversold 0",
		"redis (run 1): 2 answers outcome-unknown",
		"mix (run 1) BROKEN: round 9: oversold 1 unit",
		"mix (run 1): 2xx by strategy lua 700 · redis 800",
		"switch (run 1): 2xx by strategy atomic 800 · redis 700, 29 default switches",
		"-40", "inventory-1 750 · inventory-2 750", "2346", "12.2", "OVERSOLD", "SAFE",
		"none (run 1) OVERSOLD: oversold 40 units",
		"none: OVERSOLD in 1 of 2 runs, NO OVERSELL in 1 of 2 runs",
		"atomic: SAFE in 1 of 1 runs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("PrintTable output lacks %q:\n%s", want, out)
		}
	}

	buf.Reset()
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("WriteJSON output does not parse: %v\n%s", err, buf.String())
	}
	if len(back.Results) != 6 || back.Results[0].Oversold != 40 || back.Results[0].PerReplica["inventory-1"] != 750 ||
		back.Results[3].Breaches != 5 || back.Results[3].Unknown != 2 || len(back.Results[3].Rounds) != 2 || !slices.Equal(back.Results[4].BrokenRounds, []int64{9}) {
		t.Errorf("WriteJSON round trip = %+v, want the 6 results with their figures", back.Results)
	}
	for _, key := range []string{`"ok_2xx"`, `"sold_out_409"`, `"unavailable_503"`, `"breaches"`, `"unknown"`, `"final_stock"`, `"ledger_units"`, `"lost_updates"`, `"undersold"`,
		`"rounds"`, `"broken_rounds"`, `"per_strategy"`, `"switches"`, `"throughput_rps"`, `"p99"`, `"per_replica"`, `"verdict"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("WriteJSON output lacks key %s", key)
		}
	}
}

func TestReportShowsTheProductSpread(t *testing.T) {
	rep := Report{Runs: 1, Products: 3, Zipf: 1.1, Results: []load.Result{
		{Run: 1, Strategy: "none", Buyers: 50, OK: 40, SoldOut: 10, FinalStock: -4, LedgerUnits: 40, LedgerRows: 40, Oversold: 5, LostUpdates: 1, Verdict: verdict.Oversold,
			Products: []load.ProductResult{
				{Product: "p-1", Buyers: 25, Initial: 10, FinalStock: -5, LedgerUnits: 15, LedgerRows: 15, OK: 15, Oversold: 5, Broken: true},
				{Product: "p-2", Buyers: 10, Initial: 10, FinalStock: 0, LedgerUnits: 10, LedgerRows: 10, OK: 10},
				{Product: "p-3", Buyers: 15, Initial: 10, FinalStock: 1, LedgerUnits: 15, LedgerRows: 15, OK: 15, LostUpdates: 1, Broken: true},
			}},
		{Run: 1, Strategy: "atomic", Safe: true, Buyers: 50, OK: 20, SoldOut: 30, Verdict: verdict.Safe,
			Products: []load.ProductResult{
				{Product: "p-1", Buyers: 30, Initial: 10, LedgerUnits: 10, LedgerRows: 10, OK: 10,
					Rounds: []verdict.RoundResult{{Round: 4, Initial: 10}, {Round: 5, Current: true, Initial: 10, LedgerUnits: 10}}},
				{Product: "p-2", Buyers: 12, Initial: 10, FinalStock: 5, LedgerUnits: 5, LedgerRows: 5, OK: 5},
				{Product: "p-3", Buyers: 8, Initial: 10, FinalStock: 5, LedgerUnits: 5, LedgerRows: 5, OK: 5},
			}},
	}}
	var buf bytes.Buffer
	PrintTable(&buf, rep, true)
	out := buf.String()
	for _, want := range []string{
		"none: 3 products, 2 sold out; hottest p-1: 50% of the buyers, 38% of the 2xx (15 of 40); oversold on 1: p-1 +5",
		"atomic: 3 products, 1 sold out; hottest p-1: 60% of the buyers, 50% of the 2xx (10 of 20)",
		"rounds", "1–2 per product",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("PrintTable output lacks %q:\n%s", want, out)
		}
	}
	if got := percent(3, 7224); got != "0.0%" {
		t.Errorf("percent(3, 7224) = %q, want 0.0%%", got)
	}
	if got := percent(12, 1000); got != "1.2%" {
		t.Errorf("percent(12, 1000) = %q, want 1.2%%", got)
	}
	if strings.Count(out, "│ none ") != 1 || strings.Count(out, "│ atomic ") != 1 {
		t.Errorf("PrintTable: want one row per strategy:\n%s", out)
	}

	buf.Reset()
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"products": 3`, `"zipf": 1.1`, `"product": "p-1"`, `"final_stock": -5`, `"ledger_units": 15`, `"oversold": 5`, `"ok_2xx": 15`, `"sold_out_409"`, `"broken": true`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("WriteJSON output lacks %s:\n%s", key, buf.String())
		}
	}
	single := Report{Runs: 1, Results: []load.Result{{Run: 1, Strategy: "atomic", Safe: true, Verdict: verdict.Safe}}}
	buf.Reset()
	if err := WriteJSON(&buf, single); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"products"`, `"zipf"`, `"seed"`} {
		if strings.Contains(buf.String(), key) {
			t.Errorf("WriteJSON of a one-product run has %s, want today's output unchanged:\n%s", key, buf.String())
		}
	}
}

func TestHTMLShowsTheHottestProducts(t *testing.T) {
	var ps []load.ProductResult
	for i := range 12 {
		ps = append(ps, load.ProductResult{Product: "hot-" + strconv.Itoa(i+1), Buyers: int64(100 / (i + 1)), OK: int64(min(20, 100/(i+1)))})
	}
	rep := &Report{Runs: 1, Products: 12, Results: []load.Result{{Run: 1, Strategy: "atomic", Safe: true, OK: 200, Products: ps}}}
	var buf bytes.Buffer
	if err := renderHTML(&buf, t.TempDir(), rep, nil); err != nil {
		t.Fatalf("renderHTML: %v", err)
	}
	page := buf.String()
	for _, want := range []string{"Sales on the hottest products", `"hot-1"`, `"hot-10"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the report of a many-product run lacks %q", want)
		}
	}
	if strings.Contains(page, `"hot-11"`) {
		t.Errorf("the report shows hot-11, want the hottest %d products only", hottestShown)
	}
	buf.Reset()
	rep.Results[0].Products = nil
	if err := renderHTML(&buf, t.TempDir(), rep, nil); err != nil {
		t.Fatalf("renderHTML: %v", err)
	}
	if strings.Contains(buf.String(), "Sales on the hottest products") {
		t.Errorf("the report of a one-product run has the per-product chart")
	}
}

// TestTableShowsTheHistory: the history column, its inconclusive and
// failed products under the table, and where the state came from.
func TestTableShowsTheHistory(t *testing.T) {
	rep := Report{Runs: 1, Results: []load.Result{
		{Strategy: "atomic", Safe: true, Verdict: verdict.Safe, StateFrom: load.FromPostgres,
			History: &load.History{Verdict: "LINEARIZABLE", Ops: 301, Seconds: 0.004}},
		{Strategy: "lua", Safe: true, Verdict: verdict.NotLinearizable, StateFrom: load.FromPostgres,
			Reasons: []string{"history of sku-1 not linearizable (false sold-out): client 3: sell 1 → sold out"},
			History: &load.History{Verdict: "NOT LINEARIZABLE", Ops: 301, Seconds: 1.25, Products: []load.HistoryProduct{
				{Product: "sku-1", Verdict: "NOT LINEARIZABLE", Violation: "false sold-out", Visualization: "/tmp/r-lua-sku-1.html"}}}},
		{Strategy: "redis", Safe: true, Verdict: verdict.Safe, StateFrom: load.FromPostgres,
			History: &load.History{Verdict: "INCONCLUSIVE", Ops: 2001, Seconds: 30, Products: []load.HistoryProduct{
				{Product: "sku-1", Verdict: "INCONCLUSIVE", Ops: 2001, Seconds: 30}}}},
	}}
	var buf bytes.Buffer
	PrintTable(&buf, rep, true)
	out := buf.String()
	for _, want := range []string{
		"history", "LIN 0.00s", "NOT LIN 1.2s", "INCONCL 30s", "NOT LINEARIZABLE",
		"lua NOT LINEARIZABLE: history of sku-1 not linearizable (false sold-out)",
		"lua history: sku-1 NOT LINEARIZABLE (false sold-out), see /tmp/r-lua-sku-1.html",
		"redis history: sku-1 INCONCLUSIVE after 30s (2001 ops): not checked, so not a pass",
		"read from Postgres",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("PrintTable output lacks %q:\n%s", want, out)
		}
	}
}

// TestAnUnverifiedTableSaysSo: rows whose state was read through the
// service's API, not from Postgres, get a line above the table saying
// their verdicts are UNVERIFIED and how to verify them, and the verdict
// column says so too; a table read from Postgres says neither.
func TestAnUnverifiedTableSaysSo(t *testing.T) {
	rows := func(from string) Report {
		rep := Report{Runs: 2}
		for run := 1; run <= 2; run++ {
			for _, name := range append(slices.Clone(sixteen), load.RowMix, load.RowSwitch) {
				rep.Results = append(rep.Results, load.Result{Run: run, Strategy: name, Verdict: verdict.NotLinearizable, StateFrom: from,
					Initial: 20000, Buyers: 150000, OK: 10500, SoldOut: 139000, Unavailable: 500, FinalStock: -500, LedgerUnits: 10500, Oversold: 500,
					Throughput: 12345.6, LatencyMs: load.Latency{P99: 12345.6}})
			}
		}
		return rep
	}
	var buf bytes.Buffer
	PrintTable(&buf, rows(load.FromAPI), false)
	lines := strings.Split(buf.String(), "\n")
	if !strings.HasPrefix(lines[0], "UNVERIFIED: ") || !strings.Contains(lines[0], "--postgres-url") || !strings.Contains(lines[1], "unverified") {
		t.Errorf("a table read through the API begins %q / %q; want an UNVERIFIED line naming --postgres-url, then a header with \"unverified\"", lines[0], lines[1])
	}
	for i, line := range lines[1 : 3+36] {
		if n := text.StringWidthWithoutEscSequences(line); n > 100 {
			t.Errorf("line %d is %d columns wide, want at most 100:\n%s", i+2, n, line)
		}
	}
	buf.Reset()
	PrintTable(&buf, rows(load.FromPostgres), false)
	if strings.Contains(buf.String(), "UNVERIFIED") || strings.Contains(buf.String(), "unverified") {
		t.Errorf("a table read from Postgres says unverified:\n%s", buf.String())
	}
}

// sixteen are the strategies' names (internal/stock's), for tables as
// wide as a full run makes them.
var sixteen = []string{"none", "local", "setnx", "redis", "reentrant", "fair", "redlock", "etcd", "zookeeper", "pglock",
	"optimistic", "lua", "atomic", "forupdate", "batch", "handoff"}

// TestTableFits100Columns: the default table of 16 strategies, the mix and
// switch rows, two runs each, with the longest verdict and large figures,
// has no line wider than 100 columns; --wide keeps every column.
func TestTableFits100Columns(t *testing.T) {
	verdicts := []string{verdict.NotLinearizable, verdict.LostUpdates, verdict.NoOversell, verdict.Undersold, verdict.Oversold, verdict.Broken, verdict.Safe}
	rep := Report{Runs: 2}
	for run := 1; run <= 2; run++ {
		for i, name := range append(slices.Clone(sixteen), load.RowMix, load.RowSwitch) {
			rep.Results = append(rep.Results, load.Result{Run: run, Strategy: name, Verdict: verdicts[i%len(verdicts)],
				Initial: 20000, Buyers: 150000, OK: 10500, SoldOut: 139000, Unavailable: 500, FinalStock: -500, LedgerUnits: 10500, Oversold: 500,
				Rounds:     []verdict.RoundResult{{Round: 1, Initial: 10000}, {Round: 2, Initial: 10000}},
				Throughput: 12345.6, LatencyMs: load.Latency{P50: 12.5, P95: 999.9, P99: 12345.6, Max: 23456.7},
				PerReplica: map[string]int64{"inventory-1": 75000, "inventory-2": 75000}})
		}
	}
	var buf bytes.Buffer
	PrintTable(&buf, rep, false)
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	table := lines[:2+len(rep.Results)] // the header, its rule and a line per row
	for i, line := range table {
		if n := text.StringWidthWithoutEscSequences(line); n > 100 {
			t.Errorf("PrintTable line %d is %d columns wide, want at most 100:\n%s", i+1, n, line)
		}
	}
	for _, want := range []string{"run", "strategy", "verdict", "sold", "2xx", "409", "503", "final", "oversold", "req/s", "p99 ms"} {
		if !strings.Contains(table[0], want) {
			t.Errorf("the table's header %q lacks %q", table[0], want)
		}
	}
	for _, want := range []string{"optimistic", verdict.NotLinearizable, "10500/20000", "139000", "-500", "12346", "12345.6", "none (run 1): rounds 1 2"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "│") {
		t.Errorf("the default table has column rules; want columns two spaces apart:\n%s", buf.String())
	}

	buf.Reset()
	PrintTable(&buf, rep, true)
	header := strings.SplitN(buf.String(), "\n", 3)[1]
	var cols []string
	for _, c := range strings.Split(header, "│") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	want := []string{"run", "strategy", "safe?", "2xx", "409", "503", "errors", "breaches", "final", "ledger", "oversold", "lost", "undersold",
		"rounds", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "per replica", "history", "verdict"}
	if !slices.Equal(cols, want) {
		t.Errorf("PrintTable(wide) columns = %q, want %q", cols, want)
	}
}
