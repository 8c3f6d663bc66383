package load

import (
	"context"
	"testing"
	"time"
)

// TestWavesHandOutStartsInWaves: a paced run's first wave is all its
// concurrency at once, and the next wave waits for the tick.
func TestWavesHandOutStartsInWaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	starts := waves(ctx, time.Hour, 40, 4) // a wave every 6 minutes: only the first comes
	for range 4 {
		<-starts
	}
	select {
	case <-starts:
		t.Fatal("a fifth start before the second wave")
	case <-time.After(50 * time.Millisecond):
	}
}
