package verdict

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// LedgerRow is one row of a run's product's ledger (table sales), as read
// from Postgres after the run.
type LedgerRow struct {
	ID       int64
	Key      string // its Idempotency-Key; "" for none
	Round    int64
	Strategy string
	Instance string
}

// byKey is rows' ids by Idempotency-Key ("" for none), for CheckKeys.
func byKey(rows []LedgerRow) map[string][]int64 {
	out := map[string][]int64{}
	for _, r := range rows {
		out[r.Key] = append(out[r.Key], r.ID)
	}
	return out
}

// soldWithOthers names every strategy other than want that wrote rows:
// buyers who named none should all have got the fleet default, want.
func soldWithOthers(rows []LedgerRow, want string) []string {
	n := map[string]int{}
	for _, r := range rows {
		if r.Strategy != want {
			n[r.Strategy]++
		}
	}
	var why []string
	for _, name := range sortedKeys(n) {
		why = append(why, fmt.Sprintf("%d sales made with %s while the fleet default was %s", n[name], name, want))
	}
	return why
}

// byStrategy says which strategies, from which replicas, wrote rows, e.g.
// "redis@inventory-1 40, none@inventory-2 2": what a broken run's oversell
// was sold with.
func byStrategy(rows []LedgerRow) string {
	n := map[string]int{}
	for _, r := range rows {
		n[r.Strategy+"@"+r.Instance]++
	}
	var parts []string
	for _, who := range sortedKeys(n) {
		parts = append(parts, fmt.Sprintf("%s %d", who, n[who]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	return keys
}

// KeyedAnswer is the last answer a buyer with an Idempotency-Key got.
type KeyedAnswer struct {
	Key      string
	Definite bool  // 2xx or 409
	OK       bool  // 2xx
	SaleID   int64 // from a 2xx
}

// CheckKeys holds the ledger's rows by key against every buyer's last
// answer: each 2xx has its row, under its Idempotency-Key and with the sale
// id it was told; no key has two rows (a retry sold twice); and no row
// belongs to a buyer who was told 409 sold out or to no buyer at all. It
// returns what is wrong, one line each, at most five.
func CheckKeys(rows []LedgerRow, answers []KeyedAnswer) []string {
	keyed := byKey(rows)
	var why []string
	note := func(format string, args ...any) {
		if len(why) < 5 {
			why = append(why, fmt.Sprintf(format, args...))
		}
	}
	seen := map[string]bool{}
	for _, a := range answers {
		seen[a.Key] = true
		ids := keyed[a.Key]
		switch {
		case len(ids) > 1:
			note("key %s has %d ledger rows %v: a retry sold twice", a.Key, len(ids), ids)
		case a.OK && len(ids) == 0:
			note("key %s got 2xx (sale %d) but has no ledger row", a.Key, a.SaleID)
		case a.OK && a.SaleID != 0 && ids[0] != a.SaleID:
			note("key %s was told sale %d but its ledger row is %d", a.Key, a.SaleID, ids[0])
		case a.Definite && !a.OK && len(ids) > 0:
			note("key %s was told 409 sold out but has ledger row %d", a.Key, ids[0])
		}
	}
	for _, key := range sortedKeys(keyed) {
		if !seen[key] {
			note("ledger rows %v under key %q belong to no buyer of this run", keyed[key], key)
		}
	}
	return why
}
