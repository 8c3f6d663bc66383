package testenv

import (
	"os"
	"testing"
)

// TierEnv selects one tier of the tests, for iterating: TierUnit, TierE2E
// or TierFaults. Unset (make test, CI) every test runs.
const TierEnv = "INVENTORY_TEST_TIER"

// The tiers. A test that calls neither InTier(t, TierE2E) nor
// InTier(t, TierFaults) is a unit test: pure logic, or one or two real
// backends of its own, and it runs in every tier of its package.
const (
	TierUnit   = "unit"   // make test-unit
	TierE2E    = "e2e"    // make test-e2e: fleets behind nginx, browsers
	TierFaults = "faults" // make test-faults: the fault matrix
)

// InTier marks t as a test of tier (TierE2E or TierFaults) and skips it,
// saying so, when TierEnv selects another tier.
func InTier(t testing.TB, tier string) {
	t.Helper()
	if sel := os.Getenv(TierEnv); sel != "" && sel != tier {
		t.Skipf("a %s-tier test: %s=%s (make test-%s runs it, make test runs everything)", tier, TierEnv, sel, tier)
	}
}
