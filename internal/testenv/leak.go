package testenv

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakWait is how long NoLeaks waits for goroutines to end: clients'
// background loops (go-zookeeper's, pgx's, go-redis's) outlive their
// Close for a moment, longer on a busy machine than goleak's own retries.
const leakWait = 15 * time.Second

// NoLeaks fails t if goroutines other than those opts ignore (typically
// goleak.IgnoreCurrent() taken when the test began) are still running once
// leakWait has passed; it returns as soon as there are none.
func NoLeaks(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(leakWait)
	for {
		err := goleak.Find(opts...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines still running %v after the test: %v", leakWait, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
