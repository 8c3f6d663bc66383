package stock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"inventory/internal/inventory"
)

// The steps every strategy shares, written once.

// notCommitted reports whether a sale's transaction, which returned sale and
// err, certainly did not commit a decrement of its own: it failed before or
// at COMMIT with a definite answer, or it was a replay of another sale.
func notCommitted(sale inventory.Sale, err error) bool {
	if err != nil {
		return !errors.Is(err, inventory.ErrOutcomeUnknown)
	}
	return sale.Replayed
}

// checkThenWork is the check half of read-check-update: ErrSoldOut when
// fewer than n of the left units read remain, else the simulated work
// (Deps.WorkDelay) in the gap between the read and the write.
func checkThenWork(ctx context.Context, id string, left, n int64, work time.Duration) error {
	if left < n {
		return fmt.Errorf("%d of %q wanted, %d left: %w", n, id, left, inventory.ErrSoldOut)
	}
	return inventory.Sleep(ctx, work)
}

// backoff returns the attempt'th jittered exponential wait between min and
// max: half of the exponential step, plus a random part of the other half.
func backoff(attempt int, min, max time.Duration) time.Duration {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = 32 * time.Millisecond
		if max < min {
			max = min
		}
	}
	step := max
	if attempt < 30 {
		if s := min << attempt; s < max {
			step = s
		}
	}
	half := step / 2
	return half + rand.N(step-half+1)
}

// budget is Deps.Wait or its default.
func budget(d Deps) time.Duration {
	if d.Wait > 0 {
		return d.Wait
	}
	return 10 * time.Second
}

// marksDropper drops a holder's sold-out marks of rounds before round: the
// store, or a restock's transaction closing the round.
type marksDropper interface {
	DropMarksBefore(ctx context.Context, holder, id string, round int) error
}
