package redislock

import (
	"errors"
	"testing"
	"time"

	"inventory/internal/lock"
)

func TestFenceKey(t *testing.T) {
	tests := []struct {
		key, want string
		err       error
	}{
		{"lock:{sku-1}", "lock:{sku-1}:fence", nil},
		{"{a}b", "{a}b:fence", nil},
		{"lock-a", "{lock-a}:fence", nil},
		{"x{}y", "", lock.ErrInvalidKey}, // an empty tag does not count: hashed whole, and no companion can share that
		{"a{b", "{a{b}:fence", nil},
		{"a}b", "", lock.ErrInvalidKey},
		{"", "", lock.ErrInvalidKey},
	}
	for _, tt := range tests {
		got, err := fenceKey(tt.key)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("fenceKey(%q) = %q, %v; want %q, %v", tt.key, got, err, tt.want, tt.err)
		}
		if err == nil && slotTag(got) != slotTag(tt.key) {
			t.Errorf("fenceKey(%q) = %q hashes on %q, the key on %q: different cluster slots", tt.key, got, slotTag(got), slotTag(tt.key))
		}
	}
}

// slotTag is the part of key Redis Cluster hashes (its CLUSTER KEYSLOT input).
func slotTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}

func TestBackoffStaysWithinBoundsAndGrows(t *testing.T) {
	const lo, hi = time.Millisecond, 32 * time.Millisecond
	for run := range 200 {
		b := newBackoff(lo, hi)
		for n := range 12 {
			d := b.next()
			ceil := min(hi, lo<<n)
			if d < lo || d > ceil {
				t.Fatalf("run %d: backoff.next() #%d = %v, want within [%v, %v]", run, n, d, lo, ceil)
			}
		}
	}
	// The jitter must spread: the 10th wait is not always the same value.
	seen := map[time.Duration]bool{}
	for range 50 {
		b := newBackoff(lo, hi)
		var d time.Duration
		for range 10 {
			d = b.next()
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("backoff.next() #10 over 50 runs took %d distinct values, want jitter (≥ 10)", len(seen))
	}
}
