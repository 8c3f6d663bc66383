package lock

import (
	"testing"
	"time"
)

// TestValidUntil: a lease is trusted for its TTL less 1% and 2ms, counted
// from the send, and for at least half its TTL.
func TestValidUntil(t *testing.T) {
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		ttl, want time.Duration
	}{
		{30 * time.Second, 30*time.Second - 300*time.Millisecond - 2*time.Millisecond},
		{5 * time.Second, 5*time.Second - 50*time.Millisecond - 2*time.Millisecond},
		{100 * time.Millisecond, 100*time.Millisecond - time.Millisecond - 2*time.Millisecond},
		{3 * time.Millisecond, 1500 * time.Microsecond}, // the drift would eat most of it: half the TTL
	} {
		if got := ValidUntil(sent, c.ttl).Sub(sent); got != c.want {
			t.Errorf("ValidUntil(sent, %v) = sent + %v, want sent + %v", c.ttl, got, c.want)
		}
	}
}
