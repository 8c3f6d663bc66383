package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

func newRW(t *testing.T, url string, o Options) *RWMutex {
	t.Helper()
	if o.TTL == 0 {
		o.TTL = 5 * time.Second
	}
	if o.Wait == 0 {
		o.Wait = 5 * time.Second
	}
	return closing(t, NewRWMutex(client(t, url), o))
}

func release(t *testing.T, l lock.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release of %s: %v", l.Key(), err)
	}
}

// TestRWReadersShare: readers of two processes hold the lock at once; a
// writer cannot take it while any reader holds; once they leave it can.
func TestRWReadersShare(t *testing.T) {
	url := sharedRedis(t)
	a, b := newRW(t, url, Options{}), newRW(t, url, Options{})
	ctx := context.Background()
	const key = "rw:{share}"
	var readers []lock.Lease
	for i, m := range []*RWMutex{a, b, a, b} {
		l, err := m.RLocker().TryLock(ctx, key)
		if err != nil {
			t.Fatalf("reader %d: TryLock = %v, want the read side while only readers hold it", i, err)
		}
		readers = append(readers, l)
	}
	if _, err := a.TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("writer TryLock with 4 readers in = %v, want ErrNotAcquired", err)
	}
	for _, l := range readers {
		release(t, l)
	}
	// The writer's TryLock above registered it as waiting; its own next
	// try is not kept out by that.
	w, err := b.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("writer TryLock once the readers left = %v, want the lock", err)
	}
	if _, err := a.RLocker().TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("reader TryLock while a writer holds = %v, want ErrNotAcquired", err)
	}
	release(t, w)
}

// TestRWWriterWaitsForReadersAndIsNotStarved: a writer waits while readers
// hold; while it waits no new reader gets in (readers arriving all along
// would starve it otherwise); it gets the lock when the readers leave, and
// the readers that came behind it enter after it.
func TestRWWriterWaitsForReadersAndIsNotStarved(t *testing.T) {
	url := sharedRedis(t)
	a, b := newRW(t, url, Options{}), newRW(t, url, Options{})
	ctx := context.Background()
	const key = "rw:{starve}"
	r1, err := a.RLocker().Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var wrote atomic.Bool
	var wg sync.WaitGroup
	writerIn := make(chan lock.Lease, 1)
	wg.Go(func() {
		w, err := b.Lock(ctx, key)
		if err != nil {
			t.Errorf("writer Lock = %v, want the lock once the reader leaves", err)
			close(writerIn)
			return
		}
		wrote.Store(true)
		writerIn <- w
	})
	admin := client(t, url)
	testenv.WaitFor(t, "the writer to be waiting", 5*time.Second, func() bool {
		n, err := admin.ZCard(ctx, "rw:{starve}:writers").Result()
		return err == nil && n == 1
	})
	if _, err := a.RLocker().TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a new reader while a writer waits = %v, want ErrNotAcquired (the writer goes first)", err)
	}
	lateReader := make(chan error, 1)
	wg.Go(func() {
		l, err := a.RLocker().Lock(ctx, key)
		if err == nil {
			if !wrote.Load() {
				err = errors.New("entered before the waiting writer")
			}
			release(t, l)
		}
		lateReader <- err
	})
	release(t, r1)
	w, ok := <-writerIn
	if !ok {
		t.FailNow()
	}
	if w.Fence().Backend != Backend || w.Fence().Token < 1 {
		t.Errorf("writer's fence = %+v, want a %s token", w.Fence(), Backend)
	}
	release(t, w)
	if err := <-lateReader; err != nil {
		t.Errorf("the reader that came behind the writer: %v", err)
	}
	wg.Wait()
}

// TestRWWriterThatGivesUpLetsReadersIn: a writer whose wait runs out stops
// keeping readers out at once, not at its lease's end.
func TestRWWriterThatGivesUpLetsReadersIn(t *testing.T) {
	url := sharedRedis(t)
	a := newRW(t, url, Options{})
	b := newRW(t, url, Options{Options: lock.Options{TTL: time.Minute, Wait: 100 * time.Millisecond}})
	ctx := context.Background()
	const key = "rw:{giveup}"
	r1, err := a.RLocker().Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, key); !errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("writer Lock behind a reader with a 100ms wait = %v, want ErrTimeout", err)
	}
	r2, err := a.RLocker().TryLock(ctx, key)
	if err != nil {
		t.Fatalf("a reader after the writer gave up = %v, want the read side", err)
	}
	release(t, r1)
	release(t, r2)
}

// TestRWExcludesMutex: the write side and a Mutex are one lock, and a
// reader waits for a Mutex holder too.
func TestRWExcludesMutex(t *testing.T) {
	url := sharedRedis(t)
	rw := newRW(t, url, Options{})
	mu := closing(t, NewMutex(client(t, url), Options{Options: lock.Options{TTL: 5 * time.Second}}))
	ctx := context.Background()
	const key = "rw:{mutex}"
	m, err := mu.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("writer TryLock while a Mutex holds = %v, want ErrNotAcquired", err)
	}
	if _, err := rw.RLocker().TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("reader TryLock while a Mutex holds = %v, want ErrNotAcquired", err)
	}
	release(t, m)
	w, err := rw.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("writer TryLock after the Mutex released = %v", err)
	}
	if w.Fence().Token <= m.Fence().Token {
		t.Errorf("writer's fence %d not above the Mutex holder's %d: one counter serves both", w.Fence().Token, m.Fence().Token)
	}
	release(t, w)
}

// TestRWReaderLeaseRunsOut: a reader that stops renewing (its process died)
// frees the lock for a writer by its TTL, and a dead reader's lease cannot
// be renewed afterwards; with the watchdog, a reader outlives its TTL.
func TestRWReaderLeaseRunsOut(t *testing.T) {
	url := sharedRedis(t)
	ctx := context.Background()
	short := lock.Options{TTL: 300 * time.Millisecond, Wait: 10 * time.Second}
	dead := newRW(t, url, Options{Options: short})
	live := newRW(t, url, Options{Options: short, Watchdog: true})
	w := newRW(t, url, Options{})
	const key = "rw:{lease}"
	d, err := dead.RLocker().Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done(): // no watchdog: lost at its validity deadline
	case <-time.After(10 * time.Second):
		t.Fatal("a reader without a watchdog still held 10s after its 300ms TTL")
	}
	if !errors.Is(d.Err(), lock.ErrLost) {
		t.Errorf("the expired reader's Err() = %v, want ErrLost", d.Err())
	}
	l, err := live.RLocker().Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	admin := client(t, url)
	var start float64
	testenv.WaitFor(t, "the live reader's entry", 5*time.Second, func() bool {
		z, err := admin.ZRangeWithScores(ctx, "rw:{lease}:readers", 0, -1).Result()
		if err != nil || len(z) != 1 {
			return false
		}
		start = z[0].Score
		return true
	})
	testenv.WaitFor(t, "the watchdog to renew the reader past its first expiry", 10*time.Second, func() bool {
		z, err := admin.ZRangeWithScores(ctx, "rw:{lease}:readers", 0, -1).Result()
		return err == nil && len(z) == 1 && z[0].Score > start+300
	})
	if _, err := w.TryLock(ctx, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("writer TryLock while the renewed reader holds = %v, want ErrNotAcquired", err)
	}
	release(t, l)
	wl, err := w.Lock(ctx, key)
	if err != nil {
		t.Fatalf("writer Lock after the live reader left = %v", err)
	}
	release(t, wl)
}
