package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"inventory/internal/load"
	"inventory/internal/verdict"
	"io"
	"slices"
	"strings"
	"testing"
)

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
