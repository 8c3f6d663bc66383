package locktest

import (
	"context"
	"testing"

	"inventory/internal/lock"
)

// TestSectionsSeeNoLock is the control of the exclusion case: with a
// "lock" that lets everyone in, sections do overlap, lose updates and see
// fences that do not grow, so a broken backend cannot pass unseen.
func TestSectionsSeeNoLock(t *testing.T) {
	n := sections(t, []lock.Locker{noLock{}, noLock{}}, "k", 8, 10)
	if n.overlaps == 0 || n.lost == 0 || n.fenceDrops == 0 {
		t.Errorf("without a lock: %+v; want overlaps, lost updates and fence drops, or the detector cannot see a broken lock", n)
	}
}

// noLock grants every Lock at once, always with fence 1.
type noLock struct{}

func (noLock) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return noLease{ctx, key}, nil
}
func (noLock) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return noLease{ctx, key}, nil
}

type noLease struct {
	ctx context.Context
	key string
}

func (l noLease) Key() string                 { return l.key }
func (noLease) Fence() lock.Fence             { return lock.Fence{Backend: "none", Token: 1} }
func (l noLease) Context() context.Context    { return l.ctx }
func (l noLease) Done() <-chan struct{}       { return l.ctx.Done() }
func (noLease) Err() error                    { return nil }
func (noLease) Release(context.Context) error { return nil }
