package verdict

import (
	"fmt"
	"strings"
)

// Cell is what one cell of the fault matrix (a strategy under a fault, over
// its runs) showed: the fault's declaration, the runs it struck and how
// each was judged, and the tries it missed.
type Cell struct {
	Safe bool
	// NotApplicable is why the fault declared, before any run, that it has
	// nothing to act on with the strategy; "" when it declared it applies.
	NotApplicable string
	// Wanted is the runs asked for.
	Wanted int
	// Runs is every run the fault struck, judged (Judge).
	Runs []CellRun
	// Misses is why each try the fault did not strike missed, in order;
	// MissedInARow how many of the last of them came in a row.
	Misses       []string
	MissedInARow int
	// Refused is what the fault said when, at run time, it reported that
	// it does not apply to a strategy it had declared it applies to: the
	// declaration was wrong, and the cell proved nothing.
	Refused string
	// MustBreakLocks says the fault declares that its strike breaks the
	// strategy's lock or lease (clock-jump): at least one run must show it,
	// as a lease that ended early, a breach the fence or guard refused, or
	// two holders at once.
	MustBreakLocks bool
}

// CellRun is one struck run of a cell, as JudgeCell needs it.
type CellRun struct {
	Verdict string
	Reasons []string
	// LocksBroken is the signs that the run's lock broke: holds that
	// ended with the lease lost, answers flagged lock_breach (or the rise
	// of the breach counter), and pairs of holders that overlapped.
	LocksBroken int64
}

// CellJudgement is a cell's verdict.
type CellJudgement struct {
	// Kept is the runs that kept every invariant (Kept).
	Kept int
	// SafeBroke: the strategy is safe and a struck run did not keep them;
	// Failing names the first such verdict (BROKEN, NOT LINEARIZABLE,
	// STUCK, INCONCLUSIVE).
	SafeBroke bool
	Failing   string
	// NotStruck says why the cell proved nothing (NotStruck); "" when it
	// did.
	NotStruck string
	// Fails: the cell fails the matrix.
	Fails bool
}

// JudgeCell is the verdict of one cell of the fault matrix. A cell the fault
// declared it does not apply to passes as n/a. Otherwise it is DID NOT
// STRIKE, and fails whether the strategy is safe or not, when the fault
// said at run time that it does not apply after all, when fewer runs than
// wanted were struck, or when the fault declares that it breaks locks and no
// run showed one broken. A safe strategy's cell fails when any struck run
// did not keep every invariant.
func JudgeCell(c Cell) CellJudgement {
	var j CellJudgement
	if c.NotApplicable != "" {
		return j
	}
	var broken int64
	for _, r := range c.Runs {
		broken += r.LocksBroken
		if Kept(c.Safe, r.Verdict, r.Reasons) {
			j.Kept++
		} else if c.Safe && j.Failing == "" {
			j.Failing = r.Verdict
		}
	}
	j.SafeBroke = c.Safe && j.Kept < len(c.Runs)
	switch {
	case c.Refused != "":
		j.NotStruck = fmt.Sprintf("%s: the fault declared it applies to this strategy, then said at run time that it does not: %s", NotStruck, c.Refused)
	case len(c.Runs) < c.Wanted:
		j.NotStruck = fmt.Sprintf("%s: %d of %d runs struck; the last %d tries did not: %s",
			NotStruck, len(c.Runs), c.Wanted, c.MissedInARow, strings.Join(c.Misses[max(0, len(c.Misses)-c.MissedInARow):], "; "))
	case c.MustBreakLocks && broken == 0:
		j.NotStruck = fmt.Sprintf("%s: struck %d run%s, and no lock was seen broken in any (no lease ended early, no breach refused by the fence or guard, no two holders at once)",
			NotStruck, len(c.Runs), plural(len(c.Runs), "", "s"))
	}
	j.Fails = j.SafeBroke || j.NotStruck != ""
	return j
}
