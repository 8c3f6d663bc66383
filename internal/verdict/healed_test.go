package verdict

import (
	"testing"
	"time"
)

// TestSoldOutAfterHeal: a sold-out while stock remained is allowed while
// the fault is active, counted, and a failure once it has healed.
func TestSoldOutAfterHeal(t *testing.T) {
	healed := time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC)
	before, after := healed.Add(-time.Millisecond), healed.Add(time.Millisecond)
	for _, tt := range []struct {
		name              string
		final             int64
		sent              []time.Time
		wantDuring, wantA int
		wantWhy           bool
	}{
		{"none", 5, nil, 0, 0, false},
		{"only while the fault was active", 5, []time.Time{before, before}, 2, 0, false},
		{"one after it healed", 5, []time.Time{before, after}, 1, 1, true},
		{"sold out for real", 0, []time.Time{before, after}, 0, 0, false},
	} {
		d, a, why := SoldOutAfterHeal(tt.final, healed, tt.sent)
		if d != tt.wantDuring || a != tt.wantA || (why != "") != tt.wantWhy {
			t.Errorf("%s: SoldOutAfterHeal(%d, healed, %d sent) = %d, %d, %q; want %d, %d, why=%v",
				tt.name, tt.final, len(tt.sent), d, a, why, tt.wantDuring, tt.wantA, tt.wantWhy)
		}
	}
}
