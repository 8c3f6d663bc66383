package turn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOneTurnAtATimePerName(t *testing.T) {
	var turns Turns
	var inside [2]atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			name := []string{"a", "b"}[g%2]
			for range 100 {
				done, err := turns.Wait(context.Background(), name)
				if err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				if n := inside[g%2].Add(1); n != 1 {
					t.Errorf("%d callers of %s had their turn at once", n, name)
				}
				inside[g%2].Add(-1)
				done()
				done() // a second call does nothing
			}
		})
	}
	wg.Wait()
	if n := turns.Len(); n != 0 {
		t.Errorf("%d names left after every turn was done", n)
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	var turns Turns
	done, err := turns.Wait(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := turns.Wait(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while another has the turn = %v, want the deadline", err)
	}
	// Other names are not held up.
	other, err := turns.Wait(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	other()
	done()
	if n := turns.Len(); n != 0 {
		t.Errorf("%d names left, want 0: a caller that gave up must not leave its name behind", n)
	}
}
