package etcdbreak

import (
	"testing"

	"inventory/internal/lock/etcdlock"
)

// TestLayoutAgreesWithTheBackend holds the layout the breaker reads
// (written down here so that the fault harness compiles no lock backend)
// against etcdlock's own: a backend that moves its keys fails here, and
// faults' TestLockExpiredEarlyDeletesHoldersKeys then finds and strikes
// what real lockers wrote.
func TestLayoutAgreesWithTheBackend(t *testing.T) {
	if Prefix != etcdlock.DefaultPrefix {
		t.Errorf("Prefix = %q, want etcdlock.DefaultPrefix %q", Prefix, etcdlock.DefaultPrefix)
	}
	if Setting != etcdlock.Setting {
		t.Errorf("Setting = %q, want etcdlock.Setting %q", Setting, etcdlock.Setting)
	}
}
