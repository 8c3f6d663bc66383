package testenv

import "testing"

func TestInTierSkipsOnlyOtherTiers(t *testing.T) {
	tests := []struct {
		selected, tier string
		wantSkip       bool
	}{
		{"", TierE2E, false},
		{"", TierFaults, false},
		{TierE2E, TierE2E, false},
		{TierFaults, TierFaults, false},
		{TierUnit, TierE2E, true},
		{TierUnit, TierFaults, true},
		{TierE2E, TierFaults, true},
		{TierFaults, TierE2E, true},
	}
	for _, tt := range tests {
		t.Run(tt.selected+"_"+tt.tier, func(t *testing.T) {
			t.Setenv(TierEnv, tt.selected)
			var skipped bool
			done := make(chan struct{})
			// InTier skips with runtime.Goexit: run it in a test of its own.
			t.Run("inner", func(t *testing.T) {
				defer close(done)
				defer func() { skipped = t.Skipped() }()
				InTier(t, tt.tier)
			})
			<-done
			if skipped != tt.wantSkip {
				t.Errorf("with %s=%q, InTier(t, %q) skipped = %v, want %v", TierEnv, tt.selected, tt.tier, skipped, tt.wantSkip)
			}
		})
	}
}
