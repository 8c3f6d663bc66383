package inventory

import (
	"context"
	"fmt"
	"time"
)

// Sleep waits d unless ctx ends first, and then answers Interrupted(ctx).
// A sale's simulated business work between its check and its write
// (WORK_DELAY) is such a sleep, and so is each wait between two tries.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("interrupted during a wait of %v: %w", d, Interrupted(ctx))
	}
}

// Interrupted is ctx's error together with its cause, when the cause (a
// lost lock, say) says more.
func Interrupted(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
