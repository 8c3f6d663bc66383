package main

import (
	"bytes"
	"errors"
	"flag"
	"inventory/internal/faults/matrix"
	"inventory/internal/report"
	"io"
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
		{[]string{"--readers", "32", "--seed-ledger", "1000000"}, nil},
		{[]string{"--readers", "-1"}, errUsage},
		{[]string{"--seed-ledger", "-5"}, errUsage},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--seed-ledger", "10"}, errUsage},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--postgres-url", "postgres://x", "--seed-ledger", "10"}, nil},
		{[]string{"--client-ips", "50"}, nil},
		{[]string{"--url", "http://127.0.0.1:8080", "--admin-token", "t", "--client-ips", "65534"}, nil},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--client-ips", "2"}, nil},
		{[]string{"--url", "http://shop.example:8080", "--admin-token", "t", "--client-ips", "2"}, errUsage},
		{[]string{"--client-ips", "-1"}, errUsage},
		{[]string{"--client-ips", "65535"}, errUsage},
		{[]string{"--watchdog-interval", "0"}, nil},
		{[]string{"--watchdog-interval", "-1s"}, errUsage},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--watchdog-interval", "0"}, errUsage},
		{[]string{"--hold", "0.5", "--abandon", "0.3", "--cancel", "0.2", "--pay-at-deadline", "0.2", "--retry-steps", "--pay-within", "2s"}, nil},
		{[]string{"--hold", "1", "--refund", "1", "--ship", "0"}, nil},
		{[]string{"--hold", "1.5"}, errUsage},
		{[]string{"--hold", "-0.1"}, errUsage},
		{[]string{"--hold", "0.5", "--abandon", "0.6", "--cancel", "0.6"}, errUsage},
		{[]string{"--hold", "0.5", "--pay-within", "500ms"}, errUsage},
		{[]string{"--hold", "0.5", "--sweep-bound", "-1s"}, errUsage},
		{[]string{"--abandon", "0.3"}, errUsage},
		{[]string{"--retry-steps"}, errUsage},
		{[]string{"--hold", "0.5", "--restock-during"}, errUsage},
		{[]string{"--hold", "0.5", "--mix"}, errUsage},
		{[]string{"--orders-after", "redis", "--hold", "0.5", "--abandon", "0.4"}, nil},
		{[]string{"--orders-after", "redis"}, errUsage},
		{[]string{"--orders-after", "redis", "--abandon", "0.4"}, errUsage},
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

// TestFaultFlagsDefaults: `loadtest faults` with no flags runs the matrix
// with matrix.Defaults, which TestShortFaultMatrix starts from.
func TestFaultFlagsDefaults(t *testing.T) {
	o, err := parseFaultFlags(nil, io.Discard)
	if err != nil {
		t.Fatalf("parseFaultFlags() = %v", err)
	}
	if want := matrix.Defaults(); o.Options != want {
		t.Errorf("parseFaultFlags() = %+v, want matrix.Defaults() %+v", o.Options, want)
	}
	if o.faults != "" || o.jsonOut != "" || o.htmlOut != "" {
		t.Errorf("parseFaultFlags() faults %q json %q html %q, want all faults and no files", o.faults, o.jsonOut, o.htmlOut)
	}
}

// TestHelpListsEverySubcommand: -h names every subcommand run dispatches to.
func TestHelpListsEverySubcommand(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags(-h) = %v, want flag.ErrHelp", err)
	}
	for _, c := range subcommands {
		if !strings.Contains(help.String(), "loadtest "+c.name+" [flags]") {
			t.Errorf("loadtest -h does not list the subcommand %q:\n%s", c.name, help.String())
		}
	}
	if !strings.Contains(help.String(), "-wide") {
		t.Errorf("loadtest -h does not list --wide:\n%s", help.String())
	}
}

// TestMatrixFailureSaysWhatHappened: the exit message of a failed matrix
// names a safe strategy's broken cell as such, and a cell the fault did
// not strike as that, never as a safe strategy that broke.
func TestMatrixFailureSaysWhatHappened(t *testing.T) {
	notStruck := report.Cell{Strategy: "none", Fault: "lock-expired-early", NotStruck: "DID NOT STRIKE: 0 of 1 runs struck"}
	broke := report.Cell{Strategy: "redis", Fault: "replica-kill", Safe: true, Runs: 1, SafeBroke: true}
	for _, tt := range []struct {
		cells     []report.Cell
		want, not []string
	}{
		{[]report.Cell{notStruck}, []string{"no safe strategy broke", "did not strike in 1 cell", "none × lock-expired-early", "DID NOT STRIKE"}, []string{"a safe strategy broke"}},
		{[]report.Cell{broke}, []string{"a safe strategy broke an invariant under a fault in 1 cell", "redis × replica-kill"}, []string{"did not strike"}},
		{[]report.Cell{broke, notStruck}, []string{"redis × replica-kill", "; and the fault did not strike in 1 cell", "none × lock-expired-early"}, []string{"no safe strategy"}},
	} {
		err := matrixFailure(report.Matrix{Failed: true, Cells: tt.cells})
		if !errors.Is(err, errMatrixFailed) {
			t.Errorf("matrixFailure(%v) = %v, want errMatrixFailed", tt.cells, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("matrixFailure(%v) = %q, want it to say %q", tt.cells, err, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(err.Error(), n) {
				t.Errorf("matrixFailure(%v) = %q, must not say %q", tt.cells, err, n)
			}
		}
	}
}

// TestStampedeFlags: `loadtest stampede` refuses a mode the service does
// not know, a crowd out of bounds, a TTL the service would refuse.
func TestStampedeFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr error
	}{
		{nil, nil},
		{[]string{"--modes", "nolock,lock", "--readers", "500", "--duration", "10s", "--runs", "5", "--ttl", "1s"}, nil},
		{[]string{"--duration", "0"}, nil},
		{[]string{"--modes", "lock,sometimes"}, errUsage},
		{[]string{"--readers", "0"}, errUsage},
		{[]string{"--readers", "5001"}, errUsage},
		{[]string{"--runs", "0"}, errUsage},
		{[]string{"--duration", "-1s"}, errUsage},
		{[]string{"--ttl", "1ms"}, errUsage},
		{[]string{"extra"}, errUsage},
		{[]string{"-h"}, flag.ErrHelp},
	}
	for _, tt := range tests {
		_, err := parseStampedeFlags(tt.args, io.Discard)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("parseStampedeFlags(%q) = %v, want %v", tt.args, err, tt.wantErr)
		}
	}
}
