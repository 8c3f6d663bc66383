package verdict

import (
	"slices"
	"testing"
)

// rowsOf is a ledger whose rows are ids by key, all sold with redis.
func rowsOf(keyed map[string][]int64) []LedgerRow {
	var rows []LedgerRow
	for _, k := range sortedKeys(keyed) {
		for _, id := range keyed[k] {
			rows = append(rows, LedgerRow{ID: id, Key: k, Round: 1, Strategy: "redis", Instance: "inventory-1"})
		}
	}
	return rows
}

// TestCheckKeys: every way a buyer's last answer and the ledger's rows
// under its key can disagree is named, and agreement is silent.
func TestCheckKeys(t *testing.T) {
	answers := []KeyedAnswer{
		{Key: "k-1", Definite: true, OK: true, SaleID: 11},
		{Key: "k-2", Definite: true},
		{Key: "k-3"}, // no definite answer: a row or none
	}
	for _, tc := range []struct {
		name  string
		byKey map[string][]int64
		want  []string
	}{
		{"agree", map[string][]int64{"k-1": {11}}, nil},
		{"unknown that sold", map[string][]int64{"k-1": {11}, "k-3": {13}}, nil},
		{"sold twice", map[string][]int64{"k-1": {11, 12}}, []string{"key k-1 has 2 ledger rows [11 12]: a retry sold twice"}},
		{"2xx without a row", map[string][]int64{}, []string{"key k-1 got 2xx (sale 11) but has no ledger row"}},
		{"another sale id", map[string][]int64{"k-1": {12}}, []string{"key k-1 was told sale 11 but its ledger row is 12"}},
		{"409 that sold", map[string][]int64{"k-1": {11}, "k-2": {12}}, []string{"key k-2 was told 409 sold out but has ledger row 12"}},
		{"a row of nobody", map[string][]int64{"k-1": {11}, "": {14}}, []string{`ledger rows [14] under key "" belong to no buyer of this run`}},
	} {
		got := CheckKeys(rowsOf(tc.byKey), answers)
		if !slices.Equal(got, tc.want) {
			t.Errorf("CheckKeys(%s: %v) = %q, want %q", tc.name, tc.byKey, got, tc.want)
		}
	}
	many := map[string][]int64{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		many[k] = []int64{1}
	}
	if got := CheckKeys(rowsOf(many), answers); len(got) != 5 {
		t.Errorf("CheckKeys(7 rows of nobody, k-1 without its row) = %d lines, want at most 5", len(got))
	}
}

// TestLedgerByStrategy: who sold, and the sales of a strategy other than the default.
func TestLedgerByStrategy(t *testing.T) {
	rows := []LedgerRow{
		{ID: 1, Strategy: "redis", Instance: "inventory-1"}, {ID: 2, Strategy: "none", Instance: "inventory-2"},
		{ID: 3, Strategy: "redis", Instance: "inventory-1"}, {ID: 4, Strategy: "none", Instance: "inventory-2"},
	}
	if got, want := byStrategy(rows), "none@inventory-2 2, redis@inventory-1 2"; got != want {
		t.Errorf("byStrategy = %q, want %q", got, want)
	}
	if got, want := soldWithOthers(rows, "redis"), []string{"2 sales made with none while the fleet default was redis"}; !slices.Equal(got, want) {
		t.Errorf("soldWithOthers(redis) = %q, want %q", got, want)
	}
	if got := soldWithOthers(rows[:1], "redis"); got != nil {
		t.Errorf("soldWithOthers(only redis) = %q, want none", got)
	}
}
