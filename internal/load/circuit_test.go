package load

import (
	"strings"
	"testing"
)

func TestCircuitNotes(t *testing.T) {
	results := []Result{
		{Strategy: "none", Run: 1, Oversold: 5, Circuit: &Circuit{Product: "sku-1", Kind: "negative_stock", Quantity: -2, Initial: 250, Sold: 252, Open: true, OpenedBy: "inventory-2"}},
		{Strategy: "atomic", Run: 1},
	}
	notes := CircuitNotes(results, "http://127.0.0.1:8080")
	if len(notes) != 1 {
		t.Fatalf("CircuitNotes = %q, want one note, for none", notes)
	}
	for _, want := range []string{"none run 1", "inventory-2", "stock -2, 252 sold of 250: 2 over", "ended 5 over", "still open", "POST http://127.0.0.1:8080/products/sku-1/circuit"} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("CircuitNotes = %q, want it to say %q", notes[0], want)
		}
	}
	for _, tc := range []struct {
		c    Circuit
		want int64
	}{
		{Circuit{Quantity: -3, Initial: 10, Sold: 13}, 3},
		{Circuit{Quantity: 0, Initial: 10, Sold: 12}, 2}, // ledger_mismatch: more sold than the stock went down by
		{Circuit{Quantity: -1, Initial: 10, Sold: 10}, 1},
		{Circuit{Quantity: 4, Initial: 10, Sold: 5}, 0},
	} {
		if got := tc.c.OversoldAtTrip(); got != tc.want {
			t.Errorf("%+v.OversoldAtTrip() = %d, want %d", tc.c, got, tc.want)
		}
	}
}

// TestCircuitNotesWithoutTheDatabase: a run read through the API knows no
// circuit, but its buyers' 503 circuit-open answers say one was open, and
// the note under the table says so, and how to see more.
func TestCircuitNotesWithoutTheDatabase(t *testing.T) {
	notes := CircuitNotes([]Result{{Strategy: "none", Run: 1, Unavailable: 110, CircuitRefused: 110}, {Strategy: "atomic", Run: 1, Unavailable: 3}}, "http://127.0.0.1:8080")
	if len(notes) != 1 {
		t.Fatalf("CircuitNotes = %q, want one note, for none", notes)
	}
	for _, want := range []string{"none run 1", "110 of its buyers got 503 circuit-open", "--postgres-url", "POST http://127.0.0.1:8080/products/<id>/circuit"} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("CircuitNotes = %q, want it to say %q", notes[0], want)
		}
	}
}
