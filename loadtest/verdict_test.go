package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	// 1500 buyers for 1000 units unless a case says otherwise.
	sellOut := figures{Safe: true, Initial: 1000, Buyers: 1500, OK: 1000, SoldOut: 500, Final: 0, LedgerUnits: 1000, LedgerRows: 1000}
	tests := []struct {
		name string
		f    func(f *figures)
		want judgement
	}{
		{"safe exact sell-out", func(*figures) {}, judgement{Verdict: VerdictSafe}},
		{"safe, fewer buyers than stock", func(f *figures) {
			f.Buyers, f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = 10, 10, 0, 990, 10, 10
		},
			judgement{Verdict: VerdictSafe}},
		{"safe but 503s left stock", func(f *figures) {
			f.OK, f.SoldOut, f.Unavailable, f.Final, f.LedgerUnits, f.LedgerRows = 990, 0, 510, 10, 990, 990
		},
			judgement{Verdict: VerdictUndersold, Undersold: 10}},
		{"safe strategy oversold, stock negative", func(f *figures) { f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = 1003, 497, -3, 1003, 1003 },
			judgement{Verdict: VerdictBroken, Oversold: 3}},
		{"safe strategy lost updates", func(f *figures) { f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = 1000, 500, 4, 1000, 1000 },
			judgement{Verdict: VerdictBroken, LostUpdates: 4, Undersold: 4}},
		{"ledger rows differ from 2xx", func(f *figures) { f.OK, f.SoldOut = 999, 501 },
			judgement{Verdict: VerdictBroken}},
		{"unexpected errors", func(f *figures) { f.SoldOut, f.Errors = 499, 1 },
			judgement{Verdict: VerdictBroken}},
		{"409 while stock remained", func(f *figures) { f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = 999, 501, 1, 999, 999 },
			judgement{Verdict: VerdictBroken, Undersold: 1}},
		{"unsafe oversold by going negative", func(f *figures) {
			f.Safe, f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = false, 1040, 460, -40, 1040, 1040
		},
			judgement{Verdict: VerdictOversold, Oversold: 40}},
		{"unsafe oversold by lost updates", func(f *figures) {
			f.Safe, f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = false, 1200, 300, 0, 1200, 1200
		},
			judgement{Verdict: VerdictOversold, Oversold: 200, LostUpdates: 200}},
		{"unsafe lost updates without oversell", func(f *figures) {
			f.Safe, f.Buyers, f.OK, f.SoldOut, f.Final, f.LedgerUnits, f.LedgerRows = false, 500, 500, 0, 520, 500, 500
		},
			judgement{Verdict: VerdictLostUpdates, LostUpdates: 20}},
		{"unsafe that did not oversell", func(f *figures) { f.Safe = false }, judgement{Verdict: VerdictNoOversell}},
	}
	for _, tt := range tests {
		f := sellOut
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
		{[]string{"--nope"}, errUsage},
		{[]string{"extra"}, errUsage},
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
	}}
	var buf bytes.Buffer
	printTable(&buf, rep)
	out := buf.String()
	for _, want := range []string{
		"strategy", "2xx", "409", "503", "errors", "final", "ledger", "oversold", "lost", "undersold", "req/s", "p99 ms", "per replica", "verdict",
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
	if len(back.Results) != 3 || back.Results[0].Oversold != 40 || back.Results[0].PerReplica["inventory-1"] != 750 {
		t.Errorf("writeJSON round trip = %+v, want the 3 results with their figures", back.Results)
	}
	for _, key := range []string{`"ok_2xx"`, `"sold_out_409"`, `"unavailable_503"`, `"final_stock"`, `"ledger_units"`, `"lost_updates"`, `"undersold"`, `"throughput_rps"`, `"p99"`, `"per_replica"`, `"verdict"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("writeJSON output lacks key %s", key)
		}
	}
}
