package main

import (
	"errors"
	"io"
	"testing"
	"time"

	"inventory/internal/faults/matrix"
	"inventory/internal/load"
)

// TestFaultFlagsOrders: --orders runs the matrix in orders mode with
// matrix.DefaultOrders, its pay_within from --pay-within and its sweep's
// bound from the fleet's lock TTL and sweep interval, at the matrix's own
// size (its holds carry keys, so their histories check in time there); a
// pay_within the service refuses is a usage error.
func TestFaultFlagsOrders(t *testing.T) {
	o, err := parseFaultFlags([]string{"--orders", "--pay-within", "2s", "--lock-ttl", "2s", "--sweep-interval", "500ms"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFaultFlags(--orders …) = %v", err)
	}
	want := matrix.DefaultOrders()
	want.PayWithin, want.SweepBound = 2*time.Second, load.SweepBound(2*time.Second, 500*time.Millisecond)
	d := matrix.Defaults()
	if o.Orders == nil || *o.Orders != want || o.SweepInterval != 500*time.Millisecond || o.Concurrency != d.Concurrency ||
		o.Stock != d.Stock || o.Buyers != d.Buyers || o.Retries != d.Retries {
		t.Errorf("parseFaultFlags(--orders …): Orders %+v, SweepInterval %v, %d units, %d buyers, %d at once, %d retries; want %+v, 500ms and the matrix's defaults (%d, %d, %d, %d)",
			o.Orders, o.SweepInterval, o.Stock, o.Buyers, o.Concurrency, o.Retries, want, d.Stock, d.Buyers, d.Concurrency, d.Retries)
	}
	if o, err := parseFaultFlags([]string{"--orders", "--concurrency", "8", "--log-dir", "/tmp/fleet-logs"}, io.Discard); err != nil ||
		o.Concurrency != 8 || o.LogDir != "/tmp/fleet-logs" {
		t.Errorf("parseFaultFlags(--orders --concurrency 8 --log-dir /tmp/fleet-logs) = concurrency %d, log dir %q, %v; want 8 and the directory kept",
			o.Concurrency, o.LogDir, err)
	}
	if o, err := parseFaultFlags([]string{"--pay-within", "2s"}, io.Discard); err != nil || o.Orders != nil {
		t.Errorf("parseFaultFlags(--pay-within 2s) = Orders %+v, %v; want no orders mode without --orders", o.Orders, err)
	}
	for _, args := range [][]string{{"--orders", "--pay-within", "100ms"}, {"--sweep-interval", "-1s"}} {
		if _, err := parseFaultFlags(args, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("parseFaultFlags(%q) = %v, want errUsage", args, err)
		}
	}
}
