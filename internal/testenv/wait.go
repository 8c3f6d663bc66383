package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing t (naming what it waited for)
// when it has not held within limit. It is how a test waits for a state (a
// key gone, a row written, a count reached) instead of sleeping for it: it
// returns as soon as the state is there, and limit is only how long a busy
// machine may take, never what the test asserts. cond runs on the test's
// goroutine, so it may itself fail t (an invariant checked on every poll).
func WaitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	delay := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}
