package main

import (
	"errors"
	"flag"
	"inventory/internal/faults/matrix"
	"io"
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
		{[]string{"--client-ips", "50"}, nil},
		{[]string{"--url", "http://127.0.0.1:8080", "--admin-token", "t", "--client-ips", "65534"}, nil},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--client-ips", "2"}, nil},
		{[]string{"--url", "http://shop.example:8080", "--admin-token", "t", "--client-ips", "2"}, errUsage},
		{[]string{"--client-ips", "-1"}, errUsage},
		{[]string{"--client-ips", "65535"}, errUsage},
		{[]string{"--watchdog-interval", "0"}, nil},
		{[]string{"--watchdog-interval", "-1s"}, errUsage},
		{[]string{"--url", "http://localhost:8080", "--admin-token", "t", "--watchdog-interval", "0"}, errUsage},
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
