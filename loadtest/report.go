package main

import (
	"encoding/json"
	"fmt"
	"inventory/internal/verdict"
	"io"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Report is everything one invocation measured; --json writes it.
type Report struct {
	Target     string `json:"target"`
	LocalFleet bool   `json:"local_fleet"`
	WorkDelay  string `json:"work_delay"`
	// LockTTL is the local fleet's INVENTORY_LOCK_TTL when --lock-ttl set it.
	LockTTL     string `json:"lock_ttl,omitempty"`
	Product     string `json:"product"`
	Stock       int64  `json:"stock"`
	Buyers      int    `json:"buyers"`
	Concurrency int    `json:"concurrency"`
	Runs        int    `json:"runs"`
	// Mix, RestockDuring and SwitchEvery are the --mix, --restock-during
	// and --switch-during flags.
	Mix           bool `json:"mix"`
	RestockDuring bool `json:"restock_during"`
	SwitchEvery   int  `json:"switch_every,omitempty"`
	// Products and Zipf are --products and --zipf when more than one
	// product was sold; Product is then the ids' prefix, and Stock each
	// product's.
	Products  int     `json:"products,omitempty"`
	Zipf      float64 `json:"zipf,omitempty"`
	StartedAt string  `json:"started_at"`
	// Ceilings are the comparison figures measured in this run (--ceilings).
	Ceilings *Ceilings `json:"ceilings,omitempty"`
	Results  []Result  `json:"results"`
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
	multiRound := slices.ContainsFunc(r.Results, func(res Result) bool {
		return len(res.Rounds) > 1 || slices.ContainsFunc(res.Products, func(p ProductResult) bool { return len(p.Rounds) > 1 })
	})
	header := table.Row{}
	if multiRun {
		header = append(header, "run")
	}
	header = append(header, "strategy", "safe?", "2xx", "409", "503", "errors", "breaches", "final", "ledger",
		"oversold", "lost", "undersold")
	if multiRound {
		header = append(header, "rounds")
	}
	// max against p99 is the fairness figure: a lock that lets a waiter
	// starve shows a max far above its p99.
	header = append(header, "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "per replica", "verdict")
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
		row = append(row, res.Strategy, safe, res.OK, res.SoldOut, res.Unavailable, res.Errors, res.Breaches,
			res.FinalStock, res.LedgerUnits, res.Oversold, res.LostUpdates, res.Undersold)
		if multiRound {
			if len(res.Products) > 0 {
				row = append(row, productRounds(res.Products))
			} else {
				row = append(row, rounds(res.Rounds))
			}
		}
		row = append(row, fmt.Sprintf("%.0f", res.Throughput),
			fmt.Sprintf("%.1f", res.LatencyMs.P50), fmt.Sprintf("%.1f", res.LatencyMs.P95), fmt.Sprintf("%.1f", res.LatencyMs.P99),
			fmt.Sprintf("%.1f", res.LatencyMs.Max), perReplica(res.PerReplica), res.Verdict)
		t.AppendRow(row)
	}
	t.Render()
	for _, res := range r.Results {
		prefix := res.Strategy
		if multiRun {
			prefix = fmt.Sprintf("%s (run %d)", res.Strategy, res.Run)
		}
		for _, reason := range res.Reasons {
			fmt.Fprintf(w, "  %s %s: %s\n", prefix, res.Verdict, reason)
		}
		if res.Breaches > 0 {
			fmt.Fprintf(w, "  %s: lock broke %d time%s, the database caught %d (guarded, fenced write refused), oversold %d\n",
				prefix, res.Breaches, plural(int(res.Breaches), "", "s"), res.Breaches, res.Oversold)
		}
		if res.Unknown > 0 {
			fmt.Fprintf(w, "  %s: %d answer%s outcome-unknown (503): reconciled as 2xx ≤ ledger rows ≤ 2xx + unknown\n",
				prefix, res.Unknown, plural(int(res.Unknown), "", "s"))
		}
		if line := spread(res); line != "" {
			fmt.Fprintf(w, "  %s: %s\n", prefix, line)
		}
		if len(res.PerStrategy) > 0 {
			fmt.Fprintf(w, "  %s: 2xx by strategy %s", prefix, perReplica(res.PerStrategy))
			if res.Switches > 0 {
				fmt.Fprintf(w, ", %d default switch%s", res.Switches, plural(res.Switches, "", "es"))
			}
			fmt.Fprintln(w)
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
		for _, v := range []string{verdict.Safe, verdict.Undersold, verdict.Broken, verdict.Oversold, verdict.LostUpdates, verdict.NoOversell} {
			if n := counts[s][v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d of %d runs", v, n, runs[s]))
			}
		}
		lines = append(lines, fmt.Sprintf("%s: %s", s, strings.Join(parts, ", ")))
	}
	return lines
}

// rounds lists a run's rounds, marking those that broke an invariant, e.g. "7 8 (broken: 7)".
func rounds(rs []verdict.RoundResult) string {
	var all, broken []string
	for _, r := range rs {
		all = append(all, fmt.Sprint(r.Round))
		if r.Broken {
			broken = append(broken, fmt.Sprint(r.Round))
		}
	}
	s := strings.Join(all, " ")
	if len(broken) > 0 {
		s += " (broken: " + strings.Join(broken, " ") + ")"
	}
	return s
}

// productRounds sums up the rounds of a many-product run, marking the
// products' rounds that broke an invariant, e.g. "1–2 per product (broken: sku-1 r7)".
func productRounds(ps []ProductResult) string {
	least, most := 0, 0
	var broken []string
	for i, p := range ps {
		n := max(1, len(p.Rounds))
		if i == 0 || n < least {
			least = n
		}
		most = max(most, n)
		for _, r := range p.Rounds {
			if r.Broken {
				broken = append(broken, fmt.Sprintf("%s r%d", p.Product, r.Round))
			}
		}
	}
	s := fmt.Sprintf("%d per product", most)
	if least != most {
		s = fmt.Sprintf("%d–%d per product", least, most)
	}
	if len(broken) > 0 {
		if len(broken) > 3 {
			broken = append(broken[:3], "…")
		}
		s += " (broken: " + strings.Join(broken, ", ") + ")"
	}
	return s
}

// perReplica formats counts by name, e.g. "inventory-1 750 · inventory-2 750".
func perReplica(per map[string]int64) string {
	var parts []string
	for _, name := range replicaNames(per) {
		parts = append(parts, fmt.Sprintf("%s %d", name, per[name]))
	}
	return strings.Join(parts, " · ")
}

func writeJSON(w io.Writer, r any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
