package faults

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"inventory/internal/inventory"
)

// offered is every strategy of the service with the properties its
// GET /strategies gives, as the fault matrix reads them.
func offered() []Strategy {
	list := make([]Strategy, len(inventory.Strategies))
	for i, s := range inventory.Strategies {
		list[i] = Strategy{Name: s.Name, Safe: s.Safe, LockBackend: s.LockBackend(), UsesRedis: s.Redis, Batches: s.Batches}
	}
	return list
}

// TestApplicabilityFollowsProperties: a fault that acts on some strategies
// only decides which from what each strategy is (its properties), so a
// strategy added later is struck by every fault its properties call for,
// never skipped for a name missing from a list; a strategy it does not
// know the properties of is not applicable, and says why.
func TestApplicabilityFollowsProperties(t *testing.T) {
	for _, tt := range []struct {
		f        Fault
		strategy string
		applies  bool
	}{
		{&ClockJump{}, "redis", true}, {&ClockJump{}, "redlock", true}, {&ClockJump{}, "setnx", true},
		{&ClockJump{}, "lua", true}, {&ClockJump{}, "handoff", true},
		{&ClockJump{}, "atomic", false}, {&ClockJump{}, "etcd", false}, {&ClockJump{}, "batch", false},
		{&LockExpiredEarly{}, "zookeeper", true}, {&LockExpiredEarly{}, "pglock", true},
		{&LockExpiredEarly{}, "optimistic", false}, {&LockExpiredEarly{}, "lua", false},
		{&RedisRestart{}, "atomic", true}, // applies to every strategy
	} {
		err := AppliesTo(tt.f, Target{Strategy: tt.strategy, Strategies: offered()})
		if got := err == nil; got != tt.applies || (err != nil && !errors.Is(err, ErrNotApplicable)) {
			t.Errorf("AppliesTo(%s, %s) = %v, want applies=%v", tt.f.Name(), tt.strategy, err, tt.applies)
		}
	}
	// A strategy of a backend no fault names still gets the lock faults.
	newcomer := []Strategy{{Name: "newlock", Safe: true, LockBackend: "newlock"}}
	if err := AppliesTo(&LockExpiredEarly{}, Target{Strategy: "newlock", Strategies: newcomer}); err != nil {
		t.Errorf("AppliesTo(lock-expired-early, a strategy with lock backend newlock) = %v, want it applied", err)
	}
	if err := AppliesTo(&LockExpiredEarly{}, Target{Strategy: "unknown", Strategies: offered()}); !errors.Is(err, ErrNotApplicable) || !strings.Contains(err.Error(), "not among the strategies offered") {
		t.Errorf("AppliesTo(lock-expired-early, a strategy not offered) = %v, want not applicable, saying it is not offered", err)
	}
}

var update = flag.Bool("update", false, "rewrite docs/faults.md's applicability table from the code")

// The applicability table of docs/faults.md sits between these lines.
const (
	tableStart = "<!-- applicability table: generated from the strategies' properties by TestApplicabilityTable (go test ./internal/faults -run TestApplicabilityTable -update) -->"
	tableEnd   = "<!-- end of the applicability table -->"
)

// TestApplicabilityTable: docs/faults.md's table of which faults apply to
// which strategies is what the code decides, from the strategies'
// properties: it fails when the doc and the code differ (run it with
// -update to rewrite the table).
func TestApplicabilityTable(t *testing.T) {
	const doc = "../../docs/faults.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start, end := strings.Index(text, tableStart), strings.Index(text, tableEnd)
	if start < 0 || end < start {
		t.Fatalf("%s has no applicability table between %q and %q", doc, tableStart, tableEnd)
	}
	want := applicabilityTable()
	got := text[start+len(tableStart) : end]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(doc, []byte(text[:start+len(tableStart)]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's applicability table differs from the code's; run go test ./internal/faults -run TestApplicabilityTable -update.\nThe doc's:%s\nThe code's:%s", doc, got, want)
}

// applicabilityTable is the table as Markdown: every strategy with its
// properties, and for every fault that applies to some strategies only,
// whether it applies.
func applicabilityTable() string {
	var some []Fault
	for _, f := range All() {
		if _, ok := f.(Applicable); ok {
			some = append(some, f)
		}
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return ""
	}
	var b strings.Builder
	b.WriteString("\n| strategy | safe | lock backend | uses Redis | batches |")
	for _, f := range some {
		fmt.Fprintf(&b, " `%s` |", f.Name())
	}
	b.WriteString("\n|---|---|---|---|---|" + strings.Repeat("---|", len(some)) + "\n")
	all := offered()
	for _, s := range all {
		safe, backend := "no", ""
		if s.Safe {
			safe = "yes"
		}
		if s.LockBackend != "" {
			backend = "`" + s.LockBackend + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |", s.Name, safe, backend, yes(s.UsesRedis), yes(s.Batches))
		for _, f := range some {
			cell := "applies"
			if AppliesTo(f, Target{Strategy: s.Name, Strategies: all}) != nil {
				cell = "n/a"
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}
