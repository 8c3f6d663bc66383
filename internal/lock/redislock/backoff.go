package redislock

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields jittered exponential waits: the n-th wait is uniform in
// [min, min(max, min·2ⁿ)] ("full jitter" above the floor), so waiters spread
// out instead of retrying in lockstep, and none spins.
type backoff struct {
	min, max time.Duration
	ceil     time.Duration
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, ceil: min}
}

func (b *backoff) next() time.Duration {
	d := b.min
	if span := b.ceil - b.min; span > 0 {
		d += rand.N(span + 1)
	}
	if b.ceil < b.max {
		b.ceil = min(2*b.ceil, b.max)
	}
	return d
}

// sleep waits for t to fire or ctx to end, reporting whether t fired.
func sleep(ctx context.Context, t *time.Timer) bool {
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-t.C:
		return true
	}
}
