package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inventory/internal/report"
	"inventory/internal/testenv"
	"inventory/internal/verdict"
)

// TestOrdersAfterSellsReturnedUnitsAgain: --orders-after adds one row
// after the others, which sell outright; in it buyers hold, abandon and
// cancel while the crowd keeps coming, the units that come back are sold
// again (the abandoned carts' among them), every order invariant holds in
// Postgres, and the line under the orders table says so.
func TestOrdersAfterSellsReturnedUnitsAgain(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startE2EFleet(ctx, t)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	args := []string{"--url", f.URL, "--admin-token", f.AdminToken, "--postgres-url", f.PostgresURL, "--product", "sku-e2e-carts",
		"--strategies", "atomic", "--stock", "40", "--buyers", "120", "--concurrency", "8",
		"--orders-after", "atomic", "--hold", "0.5", "--abandon", "0.5", "--cancel", "0.2", "--pay-at-deadline", "0", "--pay-within", "1s",
		"--json", jsonPath}
	var stdout, stderr bytes.Buffer
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q) = %v\n%s\n%s", args, err, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, b)
	if len(rep.Results) != 2 || rep.Results[0].Strategy != "atomic" || rep.Results[1].Strategy != "atomic+orders" {
		t.Fatalf("rows %v, want atomic, then atomic+orders", rowNames(rep))
	}
	if plain := rep.Results[0]; plain.Orders != nil || plain.Verdict != verdict.Safe {
		t.Errorf("the atomic row: verdict %s, orders %+v; want SAFE, sold outright (no orders)", plain.Verdict, plain.Orders)
	}
	r := rep.Results[1]
	if r.Verdict != verdict.Safe || r.Orders == nil || r.Orders.Expired == 0 || r.Orders.Cancelled == 0 {
		t.Fatalf("the atomic+orders row: verdict %s %q, orders %+v; want SAFE with expired and cancelled orders", r.Verdict, r.Reasons, r.Orders)
	}
	// One unit an order: more sold again than cancels and refunds gave
	// back means abandoned carts' units were sold again too, which come
	// back only a deadline and a sweep after their hold.
	if again := report.SoldAgain(r); again <= r.Orders.Cancelled+r.Orders.Refunded {
		t.Errorf("the atomic+orders row: %d units returned (%d cancelled, %d refunded, %d expired), %d sold again (ledger %d of %d, %d left): "+
			"want more than the cancels and refunds gave back, the expired carts' units too", r.Orders.UnitsReturned, r.Orders.Cancelled,
			r.Orders.Refunded, r.Orders.Expired, again, r.LedgerUnits, r.Initial, r.FinalStock)
	}
	if !strings.Contains(rep.OrdersAfter, "started over 3s, 8 at a time") {
		t.Errorf("the report's orders setup %q, want the row's pacing", rep.OrdersAfter)
	}
	if line := "atomic+orders run 1: " + report.Comeback(r); !strings.Contains(stdout.String(), line) {
		t.Errorf("the output does not say what came of the orders (%q):\n%s", line, stdout.String())
	}
}

func rowNames(rep report.Report) []string {
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Strategy)
	}
	return names
}
