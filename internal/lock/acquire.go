package lock

import (
	"context"
	"time"
)

// Acquire is how a backend's Lock (wait true, op "lock") and TryLock
// (wait false, op "trylock") run its attempt: it reports the attempt to
// obs (nil: none), with how long it took and the round trips attempt
// counted in trips, and returns the lease, or nil and the error. An error
// that is none of the kinds (see the errors above: a timeout, a loss, …)
// is the backend failing to answer, and comes back wrapping
// ErrUnavailable: a backend classifies only what is not that.
func Acquire[L Lease](ctx context.Context, obs Observer, key, op string, wait bool,
	attempt func(ctx context.Context, key, op string, wait bool, trips *int) (L, error)) (Lease, error) {
	start := time.Now()
	trips := 0
	l, err := attempt(ctx, key, op, wait, &trips)
	if err != nil {
		err = classify(err, op, key)
	}
	if obs != nil {
		obs.Acquired(key, err, time.Since(start), trips)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}
