package report

import (
	"encoding/json"
	"fmt"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"io"
	"os"
	"slices"
	"sort"
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
	Products int     `json:"products,omitempty"`
	Zipf     float64 `json:"zipf,omitempty"`
	// OrdersAfter describes the --orders-after row (its strategy, buyers,
	// pacing and order scenario), which differs from the other rows'
	// settings; empty without one.
	OrdersAfter string `json:"orders_after,omitempty"`
	StartedAt   string `json:"started_at"`
	// Commit is the load tester's source revision (its build's, else the
	// working tree's), "-dirty" when it had changes; empty when unknown.
	Commit string `json:"commit,omitempty"`
	// Ceilings are the comparison figures measured in this run (--ceilings).
	Ceilings *load.Ceilings `json:"ceilings,omitempty"`
	Results  []load.Result  `json:"results"`
	// Failed is true when some safe strategy was BROKEN, NOT
	// LINEARIZABLE, INCONCLUSIVE or STUCK; the exit code is then 1.
	Failed bool `json:"failed"`
	// Verified is true when every run's state before and after was read
	// from the fleet's Postgres; false when some was read through the
	// service's API (the table then says UNVERIFIED).
	Verified bool `json:"verified"`
}

// PrintTable writes the verdict table, its two-line legend, then one line
// per non-SAFE reason and per figure worth a note. The table fits 100 columns (strategy,
// verdict, sold of initial, 2xx, 409, 503, final stock, oversold, req/s,
// p99); wide adds every other figure (errors, breaches, ledger, lost and
// undersold units, rounds, p50 to max, the answers per replica, the
// history check), about 200 columns.
//
// When any row's state was read through the service's own API rather than
// from Postgres, a line above the table says that its verdicts are
// UNVERIFIED, and the verdict column is headed "unverified".
func PrintTable(w io.Writer, r Report, wide bool) {
	if line := unverifiedLine(r.Results); line != "" {
		fmt.Fprintln(w, line)
	}
	if wide {
		wideTable(w, r)
	} else {
		compactTable(w, r)
	}
	printLegend(w)
	printNotes(w, r, !wide)
}

// compactTable is the table of at most 100 columns: no borders, two
// spaces between columns.
func compactTable(w io.Writer, r Report) {
	t := table.NewWriter()
	style := table.StyleLight
	style.Format.Header = text.FormatDefault
	style.Options = table.Options{SeparateHeader: true}
	style.Box.PaddingLeft, style.Box.PaddingRight = "", "  "
	t.SetStyle(style)
	multiRun := r.Runs > 1
	header := table.Row{}
	if multiRun {
		header = append(header, "run")
	}
	header = append(header, "strategy", verdictHeader(r.Results), "sold", "2xx", "409", "503", "final", "oversold", "req/s", "p99 ms")
	t.AppendHeader(header)
	for _, res := range r.Results {
		row := table.Row{}
		if multiRun {
			row = append(row, res.Run)
		}
		row = append(row, res.Strategy, res.Verdict, fmt.Sprintf("%d/%d", res.LedgerUnits, res.Initial), res.OK, res.SoldOut, res.Unavailable,
			res.FinalStock, res.Oversold, fmt.Sprintf("%.0f", res.Throughput), fmt.Sprintf("%.1f", res.LatencyMs.P99))
		t.AppendRow(row)
	}
	var cols []table.ColumnConfig
	for i, h := range header { // the figures right-aligned, their headers too
		if h != "strategy" && h != "verdict" && h != "unverified" {
			cols = append(cols, table.ColumnConfig{Number: i + 1, Align: text.AlignRight, AlignHeader: text.AlignRight})
		}
	}
	t.SetColumnConfigs(cols)
	// The last column's right padding would end every line in spaces, and
	// the header's rule two columns past the table.
	lines := strings.Split(t.Render(), "\n")
	width := 0
	for i, line := range lines {
		lines[i] = strings.TrimRight(line, " ")
		if strings.Trim(lines[i], "─") != "" {
			width = max(width, text.StringWidthWithoutEscSequences(lines[i]))
		}
	}
	for _, line := range lines {
		if strings.Trim(line, "─") == "" {
			line = strings.Repeat("─", width)
		}
		fmt.Fprintln(w, line)
	}
}

// wideTable is every figure of every row, in a bordered table.
func wideTable(w io.Writer, r Report) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	multiRun := r.Runs > 1
	multiRound := slices.ContainsFunc(r.Results, func(res load.Result) bool {
		return len(res.Rounds) > 1 || slices.ContainsFunc(res.Products, func(p load.ProductResult) bool { return len(p.Rounds) > 1 })
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
	header = append(header, "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "per replica", "history", verdictHeader(r.Results))
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
			fmt.Sprintf("%.1f", res.LatencyMs.Max), perReplica(res.PerReplica), historyCell(res.History), res.Verdict)
		t.AppendRow(row)
	}
	t.Render()
}

// unverified reports whether some result's state before and after was read
// through the service's API, which could vouch for itself, instead of from
// the fleet's Postgres.
func unverified(results []load.Result) bool {
	return slices.ContainsFunc(results, func(r load.Result) bool { return r.StateFrom == load.FromAPI })
}

// verdictHeader is the verdict column's header: "verdict", or "unverified"
// when unverified (no wider than the widest verdict, so the table still
// fits 100 columns).
func verdictHeader(results []load.Result) string {
	if unverified(results) {
		return "unverified"
	}
	return "verdict"
}

// unverifiedLine is the line above the table of a report read through the
// API, saying how to get verified verdicts; "" when every state came from
// Postgres.
func unverifiedLine(results []load.Result) string {
	if !unverified(results) {
		return ""
	}
	return "UNVERIFIED: the state before and after each run was read through the service's own API, not from Postgres " +
		"(give --postgres-url, or run against `make fleet`, whose state file names it): these verdicts take the service's word for its stock and ledger."
}

// printNotes writes, under the table, each row's reasons and the figures
// worth a line of their own; rounds too when the table has no column for
// them.
func printNotes(w io.Writer, r Report, rounds bool) {
	multiRun := r.Runs > 1
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
		if rounds {
			if line := roundsLine(res); line != "" {
				fmt.Fprintf(w, "  %s: %s\n", prefix, line)
			}
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
		for _, line := range historyLines(res.History) {
			fmt.Fprintf(w, "  %s history: %s\n", prefix, line)
		}
	}
	if line := historyNote(r.Results); line != "" {
		fmt.Fprintln(w, line)
	}
	if multiRun {
		for _, line := range summary(r.Results) {
			fmt.Fprintln(w, line)
		}
	}
}

// summary counts verdicts per strategy over several runs, e.g.
// "none: OVERSOLD in 10 of 10 runs".
func summary(results []load.Result) []string {
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
		for _, v := range []string{verdict.Safe, verdict.Undersold, verdict.Broken, verdict.NotLinearizable, verdict.Oversold, verdict.LostUpdates, verdict.NoOversell} {
			if n := counts[s][v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d of %d runs", v, n, runs[s]))
			}
		}
		lines = append(lines, fmt.Sprintf("%s: %s", s, strings.Join(parts, ", ")))
	}
	return lines
}

// roundsLine is the rounds a row sold in, when more than one, e.g.
// "rounds 7 8 (broken: 7)" or "rounds: 1–2 per product".
func roundsLine(res load.Result) string {
	switch {
	case slices.ContainsFunc(res.Products, func(p load.ProductResult) bool { return len(p.Rounds) > 1 }):
		return "rounds: " + productRounds(res.Products)
	case len(res.Rounds) > 1:
		return "rounds " + rounds(res.Rounds)
	}
	return ""
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
func productRounds(ps []load.ProductResult) string {
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

// WriteJSON writes r (a Report or a Matrix) to w as indented JSON.
func WriteJSON(w io.Writer, r any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// spread sums up a many-product row in one line: how many products sold
// out, the hottest product's (the most buyers') share of the buyers and of
// the 2xx, and where it oversold, e.g. "8 products, 3 sold out; hottest
// sku-1: 41% of the buyers, 14% of the 2xx (20 of 141); oversold on 1: sku-1 +5".
func spread(res load.Result) string {
	ps := res.Products
	if len(ps) == 0 {
		return ""
	}
	soldOut, hottest := 0, 0
	var oversold []load.ProductResult
	for i, p := range ps {
		if p.FinalStock <= 0 {
			soldOut++
		}
		if p.Buyers > ps[hottest].Buyers {
			hottest = i
		}
		if p.Oversold > 0 {
			oversold = append(oversold, p)
		}
	}
	s := fmt.Sprintf("%d products, %d sold out", len(ps), soldOut)
	if h := ps[hottest]; res.Buyers > 0 {
		s += fmt.Sprintf("; hottest %s: %s of the buyers", h.Product, percent(h.Buyers, res.Buyers))
		if res.OK > 0 {
			s += fmt.Sprintf(", %s of the 2xx (%d of %d)", percent(h.OK, res.OK), h.OK, res.OK)
		}
	}
	if len(oversold) > 0 {
		sort.SliceStable(oversold, func(a, b int) bool { return oversold[a].Oversold > oversold[b].Oversold })
		var parts []string
		for _, p := range oversold[:min(len(oversold), 5)] {
			parts = append(parts, fmt.Sprintf("%s +%d", p.Product, p.Oversold))
		}
		if len(oversold) > 5 {
			parts = append(parts, "…")
		}
		s += fmt.Sprintf("; oversold on %d: %s", len(oversold), strings.Join(parts, ", "))
	}
	return s
}

// percent formats part/whole as a percentage, with a decimal below 10%.
func percent(part, whole int64) string {
	p := 100 * float64(part) / float64(whole)
	if p < 10 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}

// replicaNames returns the keys of per in order.
func replicaNames(per map[string]int64) []string {
	names := make([]string, 0, len(per))
	for k := range per {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// PrintCeilings writes the ceilings and, per one-strategy row, its sales per
// second as a multiple of the hot-row rate and as a share of its serial
// ceiling, and its sold-out answers as a share of /healthz; with several
// runs, each strategy's medians too. Nothing without --ceilings.
func PrintCeilings(w io.Writer, r Report) {
	c := r.Ceilings
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nceilings, measured in this run for %.0fs each, at the start: ", c.Seconds)
	if c.HotRow > 0 {
		fmt.Fprintf(w, "hot row %.0f one-sale transactions/s (%d clients, straight to Postgres) · ", c.HotRow, c.HotRowClients)
	}
	if c.Redis > 0 {
		fmt.Fprintf(w, "Redis %.0f round trips/s · ", c.Redis)
	}
	if c.ManyRows > 0 {
		fmt.Fprintf(w, "many rows %.0f one-sale transactions/s (%d products drawn uniformly, %d clients, straight to Postgres) · ", c.ManyRows, c.ManyRowsProducts, c.ManyRowsClients)
	}
	fmt.Fprintf(w, "GET /healthz %.0f/s through the target; and just before each run, the hot row again and the strategy's serial ceiling\n", c.Healthz)
	header := fmt.Sprintf("%-10s %4s %9s %9s %10s %9s %9s %14s %12s\n", "strategy", "run", "sales/s", "hot row/s", "× hot row", "serial/s", "% serial", "sold-out 409/s", "% of healthz")
	fmt.Fprint(w, header)
	byStrategy := map[string][]ceilingFigures{}
	var order []string
	for _, res := range r.Results {
		if res.Seconds <= 0 {
			continue
		}
		f := figuresOf(res)
		fmt.Fprintf(w, "%-10s %4d %s\n", res.Strategy, res.Run, f)
		if len(byStrategy[res.Strategy]) == 0 {
			order = append(order, res.Strategy)
		}
		byStrategy[res.Strategy] = append(byStrategy[res.Strategy], f)
	}
	printManyRows(w, r)
	if len(r.Results) == len(order) {
		return // one run each: nothing to take a median of
	}
	fmt.Fprintf(w, "\nmedians over the runs\n")
	fmt.Fprint(w, strings.Replace(header, " run", "runs", 1))
	for _, name := range order {
		fs := byStrategy[name]
		fmt.Fprintf(w, "%-10s %4d %s\n", name, len(fs), medianFigures(fs))
	}
}

// ceilingFigures are one run's figures against the ceilings; 0 is "not
// measured".
type ceilingFigures struct {
	sales, hotRow, timesHotRow, serial, ofSerial, soldOut, ofHealthz float64
}

func figuresOf(res load.Result) ceilingFigures {
	f := ceilingFigures{sales: float64(res.OK) / res.Seconds, hotRow: res.HotRowRate, serial: res.SerialRate, soldOut: res.SoldOutRate}
	if f.hotRow > 0 {
		f.timesHotRow = f.sales / f.hotRow
	}
	if f.serial > 0 {
		f.ofSerial = 100 * f.sales / f.serial
	}
	if f.soldOut > 0 && res.SoldOutHealthz > 0 {
		f.ofHealthz = 100 * f.soldOut / res.SoldOutHealthz
	}
	return f
}

// medianFigures is each figure's median over fs, apart.
func medianFigures(fs []ceilingFigures) ceilingFigures {
	pick := func(get func(ceilingFigures) float64) float64 {
		var v []float64
		for _, f := range fs {
			v = append(v, get(f))
		}
		return median(v)
	}
	return ceilingFigures{
		sales:       pick(func(f ceilingFigures) float64 { return f.sales }),
		hotRow:      pick(func(f ceilingFigures) float64 { return f.hotRow }),
		timesHotRow: pick(func(f ceilingFigures) float64 { return f.timesHotRow }),
		serial:      pick(func(f ceilingFigures) float64 { return f.serial }),
		ofSerial:    pick(func(f ceilingFigures) float64 { return f.ofSerial }),
		soldOut:     pick(func(f ceilingFigures) float64 { return f.soldOut }),
		ofHealthz:   pick(func(f ceilingFigures) float64 { return f.ofHealthz }),
	}
}

func (f ceilingFigures) String() string {
	figure := func(format string, v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	return fmt.Sprintf("%9.0f %9s %10s %9s %9s %14s %12s", f.sales, figure("%.0f", f.hotRow), figure("%.2f", f.timesHotRow), figure("%.0f", f.serial),
		figure("%.0f%%", f.ofSerial), figure("%.0f", f.soldOut), figure("%.0f%%", f.ofHealthz))
}

// MedianSerial is each strategy's median serial ceiling over its runs.
func MedianSerial(results []load.Result) map[string]float64 {
	byStrategy := map[string][]float64{}
	for _, res := range results {
		if res.SerialRate > 0 {
			byStrategy[res.Strategy] = append(byStrategy[res.Strategy], res.SerialRate)
		}
	}
	out := map[string]float64{}
	for name, v := range byStrategy {
		out[name] = median(v)
	}
	return out
}

// median is the middle of v (the mean of the two middles for an even
// count); 0 for none. Zeros (not measured) are left out.
func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return x <= 0 })
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// WriteReport writes rep (a Report or a Matrix) as JSON to path, or to stdout for "-".
func WriteReport(path string, stdout io.Writer, rep any) error {
	if path == "-" {
		return WriteJSON(stdout, rep)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := WriteJSON(f, rep); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
