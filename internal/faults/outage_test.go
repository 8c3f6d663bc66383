package faults

import "testing"

// TestOutageIsDeclaredByTheFaultsThatTakeTheStoreAway: the faults that keep
// Postgres, the job's lock or a product's rows from every replica measure
// their outage, which the orders mode adds to the sweep's bound; one that
// kills a replica (replica-kill) must not, or a runner that fails to take
// the job over within the bound would be forgiven (runner-pause holds its
// takeover to the bound itself).
func TestOutageIsDeclaredByTheFaultsThatTakeTheStoreAway(t *testing.T) {
	outage := map[string]bool{"pg-restart": true, "pg-failover": true, "redis-restart": true, "runner-pause": true}
	for _, f := range All() {
		_, ok := f.(Outage)
		if ok != outage[f.Name()] {
			t.Errorf("%s is an Outage: %v, want %v", f.Name(), ok, outage[f.Name()])
		}
		if got := OutageOf(f); got != 0 {
			t.Errorf("OutageOf(fresh %s) = %v, want 0 before any injection", f.Name(), got)
		}
	}
}
