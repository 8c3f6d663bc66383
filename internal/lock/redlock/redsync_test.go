package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"inventory/internal/lock"
)

// newRedsync is go-redsync over the given servers, with clients of its own.
func newRedsync(t *testing.T, urls []string) *redsync.Redsync {
	t.Helper()
	var pools []redsyncredis.Pool
	for _, c := range clients(t, urls) {
		pools = append(pools, goredis.NewPool(c))
	}
	return redsync.New(pools...)
}

// redsyncMutex is a redsync lock on key that retries about as we do.
func redsyncMutex(rs *redsync.Redsync, key string) *redsync.Mutex {
	return rs.NewMutex(key,
		redsync.WithExpiry(10*time.Second),
		redsync.WithTries(10_000),
		redsync.WithRetryDelayFunc(func(int) time.Duration { return time.Millisecond + rand.N(4*time.Millisecond) }))
}

// TestRedsyncExcludes: go-redsync (v4, the reference Go Redlock) and this
// package on the same key and the same three servers exclude each other,
// one holder at a time, both ways.
func TestRedsyncExcludes(t *testing.T) {
	urls := shared(t)
	ctx := context.Background()
	const key = "lock:{cross}"
	ours := newLocker(t, urls, Options{Options: lock.Options{TTL: 10 * time.Second}})
	rs := newRedsync(t, urls)

	lease, err := ours.Lock(ctx, key)
	if err != nil {
		t.Fatalf("ours: Lock = %v", err)
	}
	var taken *redsync.ErrTaken
	if err := rs.NewMutex(key).TryLockContext(ctx); !errors.As(err, &taken) {
		t.Errorf("redsync TryLock while ours holds = %v, want ErrTaken", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("ours: Release = %v", err)
	}

	m := rs.NewMutex(key, redsync.WithExpiry(10*time.Second))
	if err := m.TryLockContext(ctx); err != nil {
		t.Fatalf("redsync: TryLock after ours released = %v", err)
	}
	if _, err := ours.TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("ours: TryLock while redsync holds = %v, want lock.ErrNotAcquired", err)
	}
	if ok, err := m.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("redsync: Unlock = %v, %v", ok, err)
	}
	lease, err = ours.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("ours: TryLock after redsync released = %v", err)
	}
	_ = lease.Release(ctx)
}

// TestRedsyncOverlap: 8 goroutines on two of our Lockers and 8 on two
// redsync instances (four processes) contend for one key; the overlap
// detector spans both, and both sides get in.
func TestRedsyncOverlap(t *testing.T) {
	urls := shared(t)
	const key = "lock:{cross-overlap}"
	opts := Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 60 * time.Second}}
	lockers := []*Locker{newLocker(t, urls, opts), newLocker(t, urls, opts)}
	rss := []*redsync.Redsync{newRedsync(t, urls), newRedsync(t, urls)}
	var oursIn, theirsIn atomic.Int64
	entries, overlaps := overlapRun(t, 16, 20, func(ctx context.Context, g int) (func(), error) {
		if g%2 == 0 {
			lease, err := lockers[g/2%2].Lock(ctx, key)
			if err != nil {
				return nil, err
			}
			oursIn.Add(1)
			return func() {
				if err := lease.Release(ctx); err != nil {
					t.Errorf("ours: Release = %v", err)
				}
			}, nil
		}
		m := redsyncMutex(rss[g/2%2], key)
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		theirsIn.Add(1)
		return func() {
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				t.Errorf("redsync: Unlock = %v, %v", ok, err)
			}
		}, nil
	})
	if overlaps != 0 || entries != 16*20 {
		t.Errorf("%d entries, %d overlapping; want %d and 0", entries, overlaps, 16*20)
	}
	t.Logf("ours got in %d times, redsync %d", oursIn.Load(), theirsIn.Load())
	if oursIn.Load() == 0 || theirsIn.Load() == 0 {
		t.Errorf("ours got in %d times, redsync %d: want both", oursIn.Load(), theirsIn.Load())
	}
}
