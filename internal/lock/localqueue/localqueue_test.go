package localqueue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOneCallerAtATimePerName(t *testing.T) {
	var queues Queues
	var inside [2]atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			name := []string{"a", "b"}[g%2]
			for range 100 {
				leave, err := queues.Wait(context.Background(), name)
				if err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				if n := inside[g%2].Add(1); n != 1 {
					t.Errorf("%d callers of %s were first at once", n, name)
				}
				inside[g%2].Add(-1)
				leave()
				leave() // a second call does nothing
			}
		})
	}
	wg.Wait()
	if n := queues.Len(); n != 0 {
		t.Errorf("%d names left after every caller left", n)
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	var queues Queues
	leave, err := queues.Wait(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := queues.Wait(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while another is first = %v, want the deadline", err)
	}
	// Other names are not held up.
	other, err := queues.Wait(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	other()
	leave()
	if n := queues.Len(); n != 0 {
		t.Errorf("%d names left, want 0: a caller that gave up must not leave its name behind", n)
	}
}
