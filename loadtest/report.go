package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Report is everything one invocation measured; --json writes it.
type Report struct {
	Target      string   `json:"target"`
	LocalFleet  bool     `json:"local_fleet"`
	WorkDelay   string   `json:"work_delay"`
	Product     string   `json:"product"`
	Stock       int64    `json:"stock"`
	Buyers      int      `json:"buyers"`
	Concurrency int      `json:"concurrency"`
	Runs        int      `json:"runs"`
	StartedAt   string   `json:"started_at"`
	Results     []Result `json:"results"`
	// Failed is true when some safe strategy was BROKEN; the exit code is then 1.
	Failed bool `json:"failed"`
}

// printTable writes the verdict table, then one line per non-SAFE reason.
func printTable(w io.Writer, r Report) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	multiRun := r.Runs > 1
	header := table.Row{}
	if multiRun {
		header = append(header, "run")
	}
	header = append(header, "strategy", "safe?", "2xx", "409", "503", "errors", "final", "ledger",
		"oversold", "lost", "undersold", "req/s", "p50 ms", "p95 ms", "p99 ms", "per replica", "verdict")
	t.AppendHeader(header)
	for _, res := range r.Results {
		row := table.Row{}
		if multiRun {
			row = append(row, res.Run)
		}
		safe := "no"
		if res.Safe {
			safe = "yes"
		}
		row = append(row, res.Strategy, safe, res.OK, res.SoldOut, res.Unavailable, res.Errors,
			res.FinalStock, res.LedgerUnits, res.Oversold, res.LostUpdates, res.Undersold,
			fmt.Sprintf("%.0f", res.Throughput),
			fmt.Sprintf("%.1f", res.LatencyMs.P50), fmt.Sprintf("%.1f", res.LatencyMs.P95), fmt.Sprintf("%.1f", res.LatencyMs.P99),
			perReplica(res.PerReplica), res.Verdict)
		t.AppendRow(row)
	}
	t.Render()
	for _, res := range r.Results {
		for _, reason := range res.Reasons {
			prefix := res.Strategy
			if multiRun {
				prefix = fmt.Sprintf("%s (run %d)", res.Strategy, res.Run)
			}
			fmt.Fprintf(w, "  %s %s: %s\n", prefix, res.Verdict, reason)
		}
		for _, e := range res.FirstErrors {
			fmt.Fprintf(w, "  %s error: %s\n", res.Strategy, e)
		}
	}
	if multiRun {
		for _, line := range summary(r.Results) {
			fmt.Fprintln(w, line)
		}
	}
}

// summary counts verdicts per strategy over several runs, e.g.
// "none: OVERSOLD in 10 of 10 runs".
func summary(results []Result) []string {
	var order []string
	counts := map[string]map[string]int{}
	runs := map[string]int{}
	for _, r := range results {
		if counts[r.Strategy] == nil {
			counts[r.Strategy] = map[string]int{}
			order = append(order, r.Strategy)
		}
		counts[r.Strategy][r.Verdict]++
		runs[r.Strategy]++
	}
	var lines []string
	for _, s := range order {
		var parts []string
		for _, v := range []string{VerdictSafe, VerdictUndersold, VerdictBroken, VerdictOversold, VerdictLostUpdates, VerdictNoOversell} {
			if n := counts[s][v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d of %d runs", v, n, runs[s]))
			}
		}
		lines = append(lines, fmt.Sprintf("%s: %s", s, strings.Join(parts, ", ")))
	}
	return lines
}

func perReplica(per map[string]int64) string {
	var parts []string
	for _, name := range replicaNames(per) {
		parts = append(parts, fmt.Sprintf("%s %d", name, per[name]))
	}
	return strings.Join(parts, " · ")
}

func writeJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
