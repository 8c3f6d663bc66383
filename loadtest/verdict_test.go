package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// oneRound is a run that sold in one round: the current one.
func oneRound(initial, units, rows, ok int64) []roundFigures {
	return []roundFigures{{Round: 1, Current: true, Initial: initial, Units: units, Rows: rows, OK: ok}}
}

func TestJudge(t *testing.T) {
	// 1500 buyers for 1000 units unless a case says otherwise.
	sellOut := figures{Safe: true, Buyers: 1500, OK: 1000, SoldOut: 500, Final: 0, LateSoldOut: 500, LateTurnedAway: 500, Rounds: oneRound(1000, 1000, 1000, 1000)}
	tests := []struct {
		name string
		f    func(f *figures)
		want judgement
	}{
		{"safe exact sell-out", func(*figures) {}, judgement{Verdict: VerdictSafe}},
		{"safe, fewer buyers than stock", func(f *figures) {
			f.Buyers, f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 10, 10, 0, 0, 0, 990, oneRound(1000, 10, 10, 10)
		},
			judgement{Verdict: VerdictSafe}},
		{"safe but 503s left stock", func(f *figures) {
			f.OK, f.SoldOut, f.Unavailable, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 990, 0, 510, 0, 510, 10, oneRound(1000, 990, 990, 990)
		},
			judgement{Verdict: VerdictUndersold, Undersold: 10}},
		{"safe strategy oversold, stock negative", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 1003, 497, 497, 497, -3, oneRound(1000, 1003, 1003, 1003)
		},
			judgement{Verdict: VerdictBroken, Oversold: 3}},
		{"safe strategy lost updates", func(f *figures) { f.Final, f.Rounds = 4, oneRound(1000, 1000, 1000, 1000) },
			judgement{Verdict: VerdictBroken, LostUpdates: 4, Undersold: 4}},
		{"ledger rows differ from 2xx", func(f *figures) { f.OK, f.SoldOut, f.Rounds[0].OK = 999, 501, 999 },
			judgement{Verdict: VerdictBroken}},
		{"2xx without a ledger row", func(f *figures) { f.OK, f.Rounds = 1000, oneRound(1000, 999, 999, 1000); f.Final = 1 },
			judgement{Verdict: VerdictBroken, Undersold: 1}},
		{"unexpected errors", func(f *figures) { f.SoldOut, f.Errors = 499, 1 },
			judgement{Verdict: VerdictBroken}},
		{"409 while stock remained", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 999, 501, 501, 501, 1, oneRound(1000, 999, 999, 999)
		},
			judgement{Verdict: VerdictBroken, Undersold: 1}},

		// Lock breaches: the lock broke, the database refused the write.
		{"breaches caught, invariants kept", func(f *figures) { f.Breaches = 7 }, judgement{Verdict: VerdictSafe}},
		{"breaches as 503 lock-lost, then sold out", func(f *figures) {
			f.SoldOut, f.Unavailable, f.Breaches = 495, 5, 5
		},
			judgement{Verdict: VerdictSafe}},
		{"breaches do not excuse an oversell", func(f *figures) {
			f.Breaches, f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 3, 1001, 499, 499, 499, -1, oneRound(1000, 1001, 1001, 1001)
		},
			judgement{Verdict: VerdictBroken, Oversold: 1}},

		// Outcome unknown: such a buyer may or may not have a ledger row.
		{"unknown that did sell", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Rounds = 998, 2, 2, 500, 500, 502, oneRound(1000, 1000, 1000, 998)
		},
			judgement{Verdict: VerdictSafe}},
		{"unknown that did not sell", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1000, 2, 2, 498, 498, 500
		},
			judgement{Verdict: VerdictSafe}},
		{"unknown, one sold and one not", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Rounds = 999, 2, 2, 499, 499, 501, oneRound(1000, 1000, 1000, 999)
		},
			judgement{Verdict: VerdictSafe}},
		{"more rows than 2xx + unknown", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Rounds = 997, 3, 2, 500, 500, 503, oneRound(1000, 1000, 1000, 997)
		},
			judgement{Verdict: VerdictBroken}},
		{"unknown does not excuse a 2xx without its row", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = 1000, 2, 2, 498, 498, 500, 1, oneRound(1000, 999, 999, 1000)
		},
			judgement{Verdict: VerdictBroken, Undersold: 1}},

		// Several rounds (--restock-during): each checked on its own.
		{"two rounds, both kept", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Buyers, f.Final, f.Rounds = 1500, 500, []roundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 1000},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 500},
			}
		},
			judgement{Verdict: VerdictSafe}},
		{"two rounds, the old one not sold out at the restock", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Final, f.Rounds = 0, []roundFigures{
				{Round: 4, Initial: 1000, Units: 500, Rows: 500, OK: 500},
				{Round: 5, Current: true, Initial: 1000, Units: 1000, Rows: 1000, OK: 1000},
			}
		},
			judgement{Verdict: VerdictSafe}},
		{"an in-flight sale oversold the old round", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Final, f.Rounds = 499, []roundFigures{
				{Round: 4, Initial: 1000, Units: 1001, Rows: 1001, OK: 1001},
				{Round: 5, Current: true, Initial: 1000, Units: 501, Rows: 501, OK: 499},
			}
		},
			judgement{Verdict: VerdictBroken, Oversold: 1, Rounds: []RoundResult{{Round: 4, Broken: true, Oversold: 1}, {Round: 5, Current: true, Broken: true}}}},
		{"2xx counted against the wrong round", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1500, 0, 0, 0
			f.Final, f.Rounds = 500, []roundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 1001},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 499},
			}
		},
			judgement{Verdict: VerdictBroken, Rounds: []RoundResult{{Round: 4, Broken: true}, {Round: 5, Current: true, Broken: true}}}},
		{"unknown reconciles across rounds, once", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1498, 2, 2, 0, 0, 0
			f.Final, f.Rounds = 500, []roundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 999},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 499},
			}
		},
			judgement{Verdict: VerdictSafe}},
		{"one unknown cannot stand for a row in each round", func(f *figures) {
			f.OK, f.Unavailable, f.Unknown, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1498, 2, 1, 0, 0, 1
			f.Final, f.Rounds = 500, []roundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 999},
				{Round: 5, Current: true, Initial: 1000, Units: 500, Rows: 500, OK: 499},
			}
		},
			judgement{Verdict: VerdictBroken, Undersold: 1}},
		{"409 before the restock is no sign of stock left", func(f *figures) {
			f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway = 1400, 100, 0, 0
			f.Final, f.Rounds = 600, []roundFigures{
				{Round: 4, Initial: 1000, Units: 1000, Rows: 1000, OK: 1000},
				{Round: 5, Current: true, Initial: 1000, Units: 400, Rows: 400, OK: 400},
			}
		},
			judgement{Verdict: VerdictSafe}},
		{"2xx naming no round of the run", func(f *figures) { f.OK, f.Unattributed = 1001, 1 },
			judgement{Verdict: VerdictBroken}},

		{"unsafe oversold by going negative", func(f *figures) {
			f.Safe, f.OK, f.SoldOut, f.LateSoldOut, f.Final, f.Rounds = false, 1040, 460, 460, -40, oneRound(1000, 1040, 1040, 1040)
		},
			judgement{Verdict: VerdictOversold, Oversold: 40}},
		{"unsafe oversold by lost updates", func(f *figures) {
			f.Safe, f.OK, f.SoldOut, f.LateSoldOut, f.Final, f.Rounds = false, 1200, 300, 300, 0, oneRound(1000, 1200, 1200, 1200)
		},
			judgement{Verdict: VerdictOversold, Oversold: 200, LostUpdates: 200}},
		{"unsafe lost updates without oversell", func(f *figures) {
			f.Safe, f.Buyers, f.OK, f.SoldOut, f.LateSoldOut, f.LateTurnedAway, f.Final, f.Rounds = false, 500, 500, 0, 0, 0, 520, oneRound(1000, 500, 500, 500)
		},
			judgement{Verdict: VerdictLostUpdates, LostUpdates: 20}},
		{"unsafe that did not oversell", func(f *figures) { f.Safe = false }, judgement{Verdict: VerdictNoOversell}},
	}
	for _, tt := range tests {
		f := sellOut
		f.Rounds = slices.Clone(sellOut.Rounds)
		tt.f(&f)
		got := judge(f)
		if got.Verdict != tt.want.Verdict || got.Oversold != tt.want.Oversold || got.LostUpdates != tt.want.LostUpdates || got.Undersold != tt.want.Undersold {
			t.Errorf("%s: judge(%+v) = %s oversold %d lost %d undersold %d (%q), want %s oversold %d lost %d undersold %d",
				tt.name, f, got.Verdict, got.Oversold, got.LostUpdates, got.Undersold, got.Reasons,
				tt.want.Verdict, tt.want.Oversold, tt.want.LostUpdates, tt.want.Undersold)
		}
		if (got.Verdict == VerdictSafe) != (len(got.Reasons) == 0) && f.Safe {
			t.Errorf("%s: judge(%+v) verdict %s with reasons %q: a safe strategy is SAFE exactly when nothing is wrong", tt.name, f, got.Verdict, got.Reasons)
		}
		if failing(got.Verdict) != (got.Verdict == VerdictBroken) {
			t.Errorf("%s: failing(%s) = %v", tt.name, got.Verdict, failing(got.Verdict))
		}
		if len(got.Rounds) != len(f.Rounds) {
			t.Errorf("%s: judge(%+v) judged %d rounds, want %d", tt.name, f, len(got.Rounds), len(f.Rounds))
			continue
		}
		for i, want := range tt.want.Rounds {
			if g := got.Rounds[i]; g.Round != want.Round || g.Broken != want.Broken || g.Oversold != want.Oversold || g.Current != want.Current {
				t.Errorf("%s: judge(%+v) round %d = %+v, want round %d broken %v oversold %d current %v (%q)",
					tt.name, f, i, g, want.Round, want.Broken, want.Oversold, want.Current, got.Reasons)
			}
		}
		if len(tt.want.Rounds) > 0 && !slices.Equal(got.BrokenRounds(), brokenOf(tt.want.Rounds)) {
			t.Errorf("%s: BrokenRounds() = %v, want %v", tt.name, got.BrokenRounds(), brokenOf(tt.want.Rounds))
		}
	}
}

func brokenOf(rs []RoundResult) []int64 {
	var out []int64
	for _, r := range rs {
		if r.Broken {
			out = append(out, r.Round)
		}
	}
	return out
}

// TestReconcile pins down the "2xx ≤ rows ≤ 2xx + unknown" rule.
func TestReconcile(t *testing.T) {
	tests := []struct {
		rows, ok, unknown int64
		wantOK            bool
	}{
		{10, 10, 0, true},
		{9, 10, 0, false},  // a 2xx without its row
		{11, 10, 0, false}, // a row nobody was told about
		{10, 10, 3, true},  // no unknown sold
		{13, 10, 3, true},  // every unknown sold
		{12, 10, 3, true},
		{14, 10, 3, false},
		{9, 10, 3, false}, // unknowns never excuse a missing row
	}
	for _, tt := range tests {
		got := reconcile(tt.rows, tt.ok, tt.unknown)
		if (got == "") != tt.wantOK {
			t.Errorf("reconcile(rows %d, 2xx %d, unknown %d) = %q, want ok %v", tt.rows, tt.ok, tt.unknown, got, tt.wantOK)
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr error
	}{
		{nil, nil},
		{[]string{"--stock", "100", "--buyers", "150", "--concurrency", "8", "--runs", "3"}, nil},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t"}, nil},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--work-delay", "5ms"}, errUsage},
		{[]string{"--buyers", "0"}, errUsage},
		{[]string{"--work-delay", "-1ms"}, errUsage},
		{[]string{"--lock-wait", "-1s"}, errUsage},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--lock-wait", "20s"}, errUsage},
		{[]string{"--lock-ttl", "10ms", "--work-delay", "9ms"}, nil},
		{[]string{"--lock-ttl", "5ms", "--work-delay", "0"}, errUsage},
		{[]string{"--lock-ttl", "10ms", "--work-delay", "10ms"}, errUsage},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--lock-ttl", "1s"}, errUsage},
		{[]string{"--nope"}, errUsage},
		{[]string{"extra"}, errUsage},
		{[]string{"--mix", "--restock-during", "--switch-during", "25"}, nil},
		{[]string{"--switch-during", "-1"}, errUsage},
		{[]string{"--switch-during"}, errUsage},
		{[]string{"-h"}, flag.ErrHelp},
	}
	t.Setenv("INVENTORY_ADMIN_TOKEN", "")
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("parseFlags(%q) = %v, want %v", tt.args, err, tt.wantErr)
		}
	}
	if _, err := parseFlags([]string{"--url", "http://localhost:8080"}, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("parseFlags(--url without a token, INVENTORY_ADMIN_TOKEN unset) = %v, want errUsage", err)
	}
}

func TestReportShowsEveryFigure(t *testing.T) {
	rep := Report{Runs: 2, Results: []Result{
		{Run: 1, Strategy: "none", OK: 1040, SoldOut: 460, FinalStock: -40, LedgerUnits: 1040, LedgerRows: 1040, Oversold: 40,
			PerReplica: map[string]int64{"inventory-2": 750, "inventory-1": 750}, Verdict: VerdictOversold, Reasons: []string{"oversold 40 units"}},
		{Run: 2, Strategy: "none", Verdict: VerdictNoOversell},
		{Run: 1, Strategy: "atomic", Safe: true, OK: 1000, SoldOut: 500, LedgerUnits: 1000, LedgerRows: 1000,
			LatencyMs: Latency{P50: 1.25, P95: 7.5, P99: 12.25}, Throughput: 2345.6, Verdict: VerdictSafe},
		{Run: 1, Strategy: "redis", Safe: true, OK: 1498, SoldOut: 0, Unavailable: 4, Breaches: 5, Unknown: 2, Verdict: VerdictSafe,
			Rounds: []RoundResult{{Round: 7, Initial: 1000, LedgerUnits: 1000, LedgerRows: 1000, OK: 999}, {Round: 8, Current: true, Initial: 1000, LedgerUnits: 500, LedgerRows: 500, OK: 499}}},
		{Run: 1, Strategy: rowMix, Safe: true, Verdict: VerdictBroken, Reasons: []string{"round 9: oversold 1 unit: ledger 1001 > initial 1000"},
			PerStrategy: map[string]int64{"lua": 700, "redis": 800}, BrokenRounds: []int64{9},
			Rounds: []RoundResult{{Round: 9, Broken: true, Oversold: 1}, {Round: 10, Current: true}}},
		{Run: 1, Strategy: rowSwitch, Safe: true, Verdict: VerdictSafe, PerStrategy: map[string]int64{"atomic": 800, "redis": 700}, Switches: 29},
	}}
	var buf bytes.Buffer
	printTable(&buf, rep)
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
			t.Errorf("printTable output lacks %q:\n%s", want, out)
		}
	}

	buf.Reset()
	if err := writeJSON(&buf, rep); err != nil {
		t.Fatalf("writeJSON: %v", err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("writeJSON output does not parse: %v\n%s", err, buf.String())
	}
	if len(back.Results) != 6 || back.Results[0].Oversold != 40 || back.Results[0].PerReplica["inventory-1"] != 750 ||
		back.Results[3].Breaches != 5 || back.Results[3].Unknown != 2 || len(back.Results[3].Rounds) != 2 || !slices.Equal(back.Results[4].BrokenRounds, []int64{9}) {
		t.Errorf("writeJSON round trip = %+v, want the 6 results with their figures", back.Results)
	}
	for _, key := range []string{`"ok_2xx"`, `"sold_out_409"`, `"unavailable_503"`, `"breaches"`, `"unknown"`, `"final_stock"`, `"ledger_units"`, `"lost_updates"`, `"undersold"`,
		`"rounds"`, `"broken_rounds"`, `"per_strategy"`, `"switches"`, `"throughput_rps"`, `"p99"`, `"per_replica"`, `"verdict"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("writeJSON output lacks key %s", key)
		}
	}
}

func TestJudgeFaulted(t *testing.T) {
	// A killed replica: 3 buyers got no definite answer, 2 of them sold.
	f := figures{Safe: true, Faulted: true, Buyers: 10, OK: 5, SoldOut: 2, Unavailable: 1, Errors: 2, Final: 3,
		Rounds: []roundFigures{{Round: 1, Current: true, Initial: 10, Units: 7, Rows: 7, OK: 5}}}
	if j := judge(f); j.Verdict != VerdictSafe && j.Verdict != VerdictUndersold {
		t.Errorf("judge(faulted, 2 rows among 3 indefinite answers) = %s %v, want SAFE or UNDERSOLD", j.Verdict, j.Reasons)
	}
	f.Rounds[0].Rows, f.Rounds[0].Units, f.Final = 4, 4, 6 // a 2xx without its row
	if j := judge(f); j.Verdict != VerdictBroken {
		t.Errorf("judge(faulted, fewer rows than 2xx) = %s, want BROKEN", j.Verdict)
	}
	f.Rounds[0].Rows, f.Rounds[0].Units, f.Final = 11, 11, -1
	if j := judge(f); j.Verdict != VerdictBroken || j.Oversold != 1 {
		t.Errorf("judge(faulted, oversold) = %s oversold %d, want BROKEN 1", j.Verdict, j.Oversold)
	}
}
