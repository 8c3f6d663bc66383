package report

import (
	"fmt"
	"inventory/internal/history"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Matrix is what `loadtest faults` measured; --json writes it.
type Matrix struct {
	StartedAt   string         `json:"started_at"`
	Runs        int            `json:"runs"` // faulted runs asked for per cell
	Stock       int64          `json:"stock"`
	Buyers      int            `json:"buyers"`
	Concurrency int            `json:"concurrency"`
	Retries     int            `json:"retries"`
	WorkDelay   string         `json:"work_delay"`
	LockTTL     string         `json:"lock_ttl"`
	Spread      string         `json:"spread"` // side by side, each run's buyers start over at least this long
	Strategies  []StrategyInfo `json:"strategies"`
	Faults      []string       `json:"faults"`
	Cells       []Cell         `json:"cells"`
	// FaultSeconds is how long each fault's cells took, in Faults' order.
	FaultSeconds []float64 `json:"fault_seconds"`
	// Failed is true when some cell fails (Cell.Fails); the exit status is then 1.
	Failed bool `json:"failed"`
	// Orders is the order scenario every run's buyers followed (the fault
	// matrix's orders mode, `loadtest faults --orders`); "" when they
	// bought outright.
	Orders string `json:"orders,omitempty"`
}

// StrategyInfo names a row of the matrix.
type StrategyInfo struct {
	Name string `json:"name"`
	Safe bool   `json:"safe"`
}

// Cell is one strategy under one fault, over its runs.
type Cell struct {
	Strategy string `json:"strategy"`
	Fault    string `json:"fault"`
	Safe     bool   `json:"safe"`
	// Runs is the faulted runs judged; Kept those that kept every
	// invariant (verdict.Kept: a safe strategy's run SAFE or UNDERSOLD, an
	// unsafe one's with nothing to explain), as verdict.JudgeCell counted.
	Runs int `json:"runs"`
	Kept int `json:"kept"`
	// Missed is runs whose buyers all finished before the fault could
	// strike: not counted in Runs, and tried again (twice at most per cell).
	Missed int `json:"missed,omitempty"`
	// NotApplicable says why the fault has nothing to act on with this strategy.
	NotApplicable string `json:"not_applicable,omitempty"`
	// NotStruck says why the cell proved nothing: the fault applies, but
	// one of its runs missed every try (see Missed), so the cell has fewer
	// runs than asked for and fails the matrix whether the strategy is
	// safe or not. Its label is NotStruck ("DID NOT STRIKE"), never a
	// kept/runs fraction: it broke nothing.
	NotStruck string `json:"not_struck,omitempty"`
	// Failing is, for a safe strategy's cell, the verdict of its first run
	// that did not keep every invariant (BROKEN, NOT LINEARIZABLE, STUCK,
	// INCONCLUSIVE); Fails says the cell fails the matrix (verdict.JudgeCell).
	Failing      string `json:"failing,omitempty"`
	Fails        bool   `json:"fails"`
	Oversold     int64  `json:"oversold"`       // units, summed over runs
	Breaches     int64  `json:"breaches"`       // answers flagged lock_breach
	BreachMetric int64  `json:"breach_metric"`  // rise of inventory_lock_breaches_total (at least: a killed replica's count is lost)
	Definite     int64  `json:"definite"`       // buyers whose last answer was 2xx or 409
	Indefinite   int64  `json:"indefinite_5xx"` // buyers whose last answer was 503, another 5xx or none
	Retries      int64  `json:"retries"`        // requests re-sent with the same Idempotency-Key
	// Overlaps is pairs of lock holds of the run's product held at the
	// same time (two holders each believing the lock theirs), summed over
	// runs, from the replicas' GET /products/{id}/holds.
	Overlaps int64 `json:"overlapping_holders"`
	// LeasesLost is holds whose lease was lost under their holder (or
	// whose write the database refused), from the same hold logs;
	// LeasesEnded the leases the fault itself saw end under their holders
	// (faults.LockBreaker), summed over runs.
	LeasesLost  int64 `json:"leases_lost"`
	LeasesEnded int64 `json:"leases_ended_by_fault"`
	// WaveLeft and WaveSold are, summed over runs, the units left once the
	// fault had healed and what the wave of buyers sent then bought.
	WaveLeft int64 `json:"wave_left"`
	WaveSold int64 `json:"wave_sold"`
	// Linearizable is the runs whose history of answers one order
	// explains (see load.History); the others are NOT LINEARIZABLE or
	// INCONCLUSIVE, as each run's History says.
	Linearizable int `json:"linearizable"`
	// P50 and P99 are the worst run's buyer latency percentiles, retries included.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// SafeBroke is true when the strategy is safe and a judged run did
	// not keep every invariant (a run the fault did not strike is not one).
	SafeBroke bool       `json:"safe_broke"`
	Results   []FaultRun `json:"results"`
}

// FaultRun is one faulted run: the load tester's figures of the run, and
// what the replicas' hold logs showed.
type FaultRun struct {
	load.Result
	// Overlaps is the pairs of holds of the run's product that were held
	// at the same time; OverlapSample describes the first few.
	Overlaps      int64    `json:"overlapping_holders"`
	OverlapSample []string `json:"overlap_sample,omitempty"`
	// LeasesLost is the run's holds whose lease was lost under their
	// holder; LeasesEnded the leases of its product the fault itself saw
	// end under their holders.
	LeasesLost  int64 `json:"leases_lost"`
	LeasesEnded int64 `json:"leases_ended_by_fault"`
}

// LocksBroken is the signs that the run's lock broke: leases lost or
// ended under their holders, breaches the database refused, and holders
// that overlapped.
func (r FaultRun) LocksBroken() int64 {
	return r.LeasesLost + r.LeasesEnded + max(r.Breaches, r.BreachMetric) + r.Overlaps
}

// kept reports whether a run kept every invariant.
func kept(r load.Result) bool { return verdict.Kept(r.Safe, r.Verdict, r.Reasons) }

// Add counts one judged run's figures into the cell (the cell's verdict is
// verdict.JudgeCell's, set by whoever ran it).
func (c *Cell) Add(r FaultRun) {
	c.Runs++
	c.Overlaps += r.Overlaps
	c.LeasesLost += r.LeasesLost
	c.LeasesEnded += r.LeasesEnded
	if r.Wave != nil {
		c.WaveLeft += r.Wave.Left
		c.WaveSold += r.Wave.OK
	}
	c.Oversold += r.Oversold
	c.Breaches += r.Breaches
	c.BreachMetric += r.BreachMetric
	c.Definite += r.OK + r.SoldOut
	c.Indefinite += r.Unavailable + r.Errors
	c.Retries += r.Retries
	if r.History != nil && r.History.Verdict == string(history.Linearizable) {
		c.Linearizable++
	}
	c.P50 = max(c.P50, r.LatencyMs.P50)
	c.P99 = max(c.P99, r.LatencyMs.P99)
	c.Results = append(c.Results, r)
}

// NotStruck is the label of a cell whose fault, declared to apply to the
// strategy, did not strike enough of its runs, said at run time that it did
// not apply, or never showed the effect it declares: a cell that proved
// nothing, and fails.
const NotStruck = verdict.NotStruck

// MarkNotStruck records why the cell is NotStruck (verdict.JudgeCell's
// why). The run it could not judge is kept in Results with the verdict
// NotStruck, and counted neither in Runs nor in Kept.
func (c *Cell) MarkNotStruck(r FaultRun, why string) {
	r.Verdict, r.Reasons = NotStruck, []string{why}
	c.NotStruck = why
	c.Results = append(c.Results, r)
}

// Short is the cell as the matrix shows it: "3/3" (kept / judged runs),
// with "*" when some tries missed and were run again; "n/a"; or "DID NOT
// STRIKE", with the runs that did strike, e.g. "DID NOT STRIKE (1/1)".
func (c Cell) Short() string {
	switch {
	case c.NotApplicable != "":
		return "n/a"
	case c.NotStruck != "" && c.Runs == 0:
		return NotStruck
	case c.NotStruck != "":
		return fmt.Sprintf("%s (%d/%d)", NotStruck, c.Kept, c.Runs)
	}
	s := fmt.Sprintf("%d/%d", c.Kept, c.Runs)
	if c.Missed > 0 {
		s += "*"
	}
	return s
}

// Summary is one line about the cell, for progress output.
func (c Cell) Summary() string {
	if c.NotApplicable != "" {
		return "n/a: " + c.NotApplicable
	}
	if c.NotStruck != "" && c.Runs == 0 {
		return c.NotStruck
	}
	return fmt.Sprintf("%s kept the invariants, oversold %d, breaches %d, overlapping holders %d, leases ended %d/lost %d, definite %d, 5xx %d, after the heal sold %d of %d, p99 %.0f ms",
		c.Short(), c.Oversold, max(c.Breaches, c.BreachMetric), c.Overlaps, c.LeasesEnded, c.LeasesLost, c.Definite, c.Indefinite, c.WaveSold, c.WaveLeft, c.P99)
}

// PrintMatrix writes the strategies × faults table, then the figures of
// every cell and the reasons of every run that broke. colour marks the
// cells where a safe strategy broke (red) on a terminal.
func PrintMatrix(w io.Writer, m Matrix, colour bool) {
	cell := map[[2]string]Cell{}
	for _, c := range m.Cells {
		cell[[2]string{c.Strategy, c.Fault}] = c
	}
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	header := table.Row{"strategy", "safe?"}
	for _, f := range m.Faults {
		header = append(header, f)
	}
	t.AppendHeader(header)
	for _, s := range m.Strategies {
		safe := "no"
		if s.Safe {
			safe = "yes"
		}
		row := table.Row{s.Name, safe}
		for _, f := range m.Faults {
			c := cell[[2]string{s.Name, f}]
			v := c.Short()
			switch {
			case c.SafeBroke:
				v += " " + brokeLabel(c.Failing)
				if colour {
					v = text.FgRed.Sprint(v)
				}
			case c.NotStruck != "" && colour:
				v = text.FgYellow.Sprint(v)
			}
			row = append(row, v)
		}
		t.AppendRow(row)
	}
	t.Render()
	fmt.Fprintf(w, "cells: runs that kept every invariant / faulted runs (N=%d asked; * = some tries missed the fault, were not counted and were run again).\n", m.Runs)
	fmt.Fprintf(w, "%s: the fault declared it applies, but a run missed it in every try, it said at run time that it does not apply, or it never showed the effect it declares (clock-jump: a lock broken); the cell proved nothing, and fails the matrix, safe strategy or not.\n", NotStruck)
	fmt.Fprintln(w, "BROKE: a safe strategy broke an invariant or gave an answer no order of events explains; STUCK: it sold nothing to the buyers sent once the fault had healed; INCONCLUSIVE: its history was not checked to the end. Each fails the matrix.")
	fmt.Fprintln(w, "Unsafe strategies (safe? no) are expected to break; only a safe strategy's failed run fails the matrix.")

	d := table.NewWriter()
	d.SetOutputMirror(w)
	d.SetStyle(table.StyleLight)
	d.Style().Format.Header = text.FormatDefault
	d.AppendHeader(table.Row{"strategy", "fault", "kept", "oversold", "breaches (answers/metric)", "overlapping holders", "leases ended/lost",
		"definite", "5xx", "retries", "after heal sold/left", "history", "p50 ms", "p99 ms"})
	for _, c := range m.Cells {
		if c.NotApplicable != "" {
			continue
		}
		d.AppendRow(table.Row{c.Strategy, c.Fault, c.Short(), c.Oversold, fmt.Sprintf("%d/%d", c.Breaches, c.BreachMetric),
			c.Overlaps, fmt.Sprintf("%d/%d", c.LeasesEnded, c.LeasesLost), c.Definite, c.Indefinite, c.Retries,
			fmt.Sprintf("%d/%d", c.WaveSold, c.WaveLeft), fmt.Sprintf("%d/%d lin", c.Linearizable, c.Runs), fmt.Sprintf("%.1f", c.P50), fmt.Sprintf("%.1f", c.P99)})
	}
	d.Render()
	for _, c := range m.Cells {
		if c.NotApplicable != "" {
			fmt.Fprintf(w, "  %s × %s: n/a (%s)\n", c.Strategy, c.Fault, c.NotApplicable)
		}
		for _, r := range c.Results {
			if kept(r.Result) {
				continue
			}
			fmt.Fprintf(w, "  %s\n", brokenRun(c.Strategy, c.Fault, c.Safe, r.Run, r.Verdict, r.Reasons))
		}
	}
}

// brokeLabel is how the matrix marks a safe strategy's cell that failed
// with verdict: BROKE for a broken invariant or an untrue answer, else the
// verdict (STUCK, INCONCLUSIVE).
func brokeLabel(failing string) string {
	switch failing {
	case verdict.Stuck, verdict.Inconclusive:
		return failing
	}
	return "BROKE"
}

// Failures names the cells that fail the matrix, as "strategy × fault":
// those where a safe strategy did not keep every invariant (with the
// verdict, e.g. "redis × replica-kill (STUCK)"), and those the fault did not
// strike (safe strategy or not).
func (m Matrix) Failures() (safeBroke, notStruck []string) {
	for _, c := range m.Cells {
		name := c.Strategy + " × " + c.Fault
		if c.SafeBroke {
			if c.Failing != "" && c.Failing != verdict.Broken {
				name += " (" + c.Failing + ")"
			}
			safeBroke = append(safeBroke, name)
		}
		if c.NotStruck != "" {
			notStruck = append(notStruck, name)
		}
	}
	return safeBroke, notStruck
}

// brokenRun says, in one line for the table's notes and the HTML page's,
// what a run that did not keep every invariant was: an unsafe strategy's
// expected break, a fault that never struck, or a safe strategy broken.
func brokenRun(strategy, fault string, safe bool, run int, verdict string, reasons []string) string {
	kind := "expected, unsafe"
	switch {
	case verdict == NotStruck:
		kind = "the fault did not strike: the cell proved nothing"
	case safe:
		kind = "SAFE STRATEGY BROKE"
	}
	return fmt.Sprintf("%s × %s run %d (%s): %s", strategy, fault, run, kind, strings.Join(reasons, "; "))
}
