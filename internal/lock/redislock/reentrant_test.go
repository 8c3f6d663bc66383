package redislock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
	"inventory/internal/testenv"
)

// TestReentrancy: three Locks in one owner context, two releases → still
// held and excluded for others; the third → free. Nobody else can release it.
func TestReentrancy(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	r := NewReentrant(rdb, Options{})
	other := NewReentrant(client(t, url), Options{})
	bg := context.Background()
	const key = "lock:{re}"
	a := lock.WithOwner(bg, "request-a")
	b := lock.WithOwner(bg, "request-b")

	var leases []lock.Lease
	for i := range 3 {
		l, err := r.Lock(a, key)
		if err != nil {
			t.Fatalf("Lock #%d in owner request-a = %v, want re-entry", i+1, err)
		}
		leases = append(leases, l)
	}
	if f0, f2 := leases[0].Fence().Token, leases[2].Fence().Token; f0 != f2 {
		t.Errorf("re-entry fence = %d, outer fence = %d, want equal", f2, f0)
	}
	if got := rdb.HGet(bg, key, "request-a").Val(); got != "3" {
		t.Errorf("HGET %s request-a after 3 Locks = %q, want 3", key, got)
	}
	if got := rdb.PTTL(bg, key).Val(); got <= 0 {
		t.Errorf("PTTL %s while held = %v, want a TTL", key, got)
	}
	// Someone else cannot take it nor release it.
	if l, err := other.TryLock(b, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock by request-b while request-a holds it = %v, %v; want lock.ErrNotAcquired", l, err)
	}
	if l, err := r.TryLock(b, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock by request-b through the same Reentrant = %v, %v; want lock.ErrNotAcquired", l, err)
	}
	if err := leases[2].Release(b); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of request-a's lease under owner request-b = %v, want lock.ErrNotHeld", err)
	}
	if err := leases[2].Err(); err != nil {
		t.Errorf("after request-b's refused release, request-a's lease Err() = %v, want nil", err)
	}

	for i := 2; i >= 1; i-- {
		if err := leases[i].Release(a); err != nil {
			t.Errorf("Release #%d of 3 = %v, want nil", 3-i, err)
		}
		if leases[i].Context().Err() == nil {
			t.Errorf("released lease #%d: its Context is not cancelled", i+1)
		}
	}
	if err := leases[0].Err(); err != nil || leases[0].Context().Err() != nil {
		t.Errorf("outer lease after 2 of 3 releases: Err() = %v, ctx.Err() = %v; want both nil", err, leases[0].Context().Err())
	}
	if got := rdb.HGet(bg, key, "request-a").Val(); got != "1" {
		t.Errorf("HGET %s request-a after 3 Locks, 2 Releases = %q, want 1", key, got)
	}
	if l, err := other.TryLock(b, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryLock by request-b after 2 of 3 releases = %v, %v; want lock.ErrNotAcquired", l, err)
	}
	if err := leases[1].Release(a); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release of the same lease = %v, want lock.ErrNotHeld", err)
	}
	if err := leases[0].Release(a); err != nil {
		t.Errorf("Release #3 of 3 = %v, want nil", err)
	}
	if n := rdb.Exists(bg, key).Val(); n != 0 {
		t.Errorf("EXISTS %s after the last release = %d, want 0", key, n)
	}
	if err := leases[0].Release(a); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after the last release = %v, want lock.ErrNotHeld", err)
	}
	l, err := other.TryLock(b, key)
	if err != nil {
		t.Fatalf("TryLock by request-b after request-a released all = %v", err)
	}
	if l.Fence().Token <= leases[0].Fence().Token {
		t.Errorf("request-b's fence %d, request-a's %d: want it to increase", l.Fence().Token, leases[0].Fence().Token)
	}
	if err := l.Release(b); err != nil {
		t.Errorf("request-b Release = %v", err)
	}
	r.mu.Lock()
	n := len(r.entries)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("Reentrant keeps %d entries after every hold ended, want 0", n)
	}
}

func TestReentrantNeedsOwner(t *testing.T) {
	url := sharedRedis(t)
	r := NewReentrant(client(t, url), Options{})
	bg := context.Background()
	for _, ctx := range []context.Context{bg, lock.WithOwner(bg, ""), lock.WithOwner(bg, "\x00x")} {
		if l, err := r.Lock(ctx, "lock:{no-owner}"); !errors.Is(err, ErrNoOwner) {
			t.Errorf("Lock without a valid owner (%v) = %v, %v; want ErrNoOwner", ctx, l, err)
		}
	}
}

// TestReleaseScriptRefusesOtherHold: the release script checks the hold's
// token, so another owner's token (or a stale one) cannot free the lock.
func TestReleaseScriptRefusesOtherHold(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{script}"
	a := lock.WithOwner(bg, "a")
	l, err := NewReentrant(rdb, Options{}).Lock(a, key)
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	defer l.Release(a)
	for _, final := range []string{"0", "1"} {
		v, _, err := redisscript.Run(bg, rdb, reentrantRelease, []string{key, key + ":fence"}, "b", newToken(), "7", final, key+":released")
		if err != nil || v != int64(-1) {
			t.Errorf("release script (final=%s) with a foreign token = %v, %v; want -1 (not held)", final, v, err)
		}
	}
	if got := rdb.HGet(bg, key, "a").Val(); got != "1" {
		t.Errorf("hold count after foreign release attempts = %q, want 1", got)
	}
}

// TestFencing: tokens strictly increase across acquisitions, stay equal on
// re-entry, and after Redis loses its data continue above the floor.
func TestFencing(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	floorCalls := 0
	floor := int64(1000)
	opts := Options{FenceFloor: func(ctx context.Context, key string) (int64, error) {
		floorCalls++
		return floor, nil
	}}
	tests := []struct {
		name string
		key  string
		lock func(ctx context.Context, key string) (lock.Lease, error)
	}{
		{"Mutex", "lock:{fence-m}", NewMutex(rdb, opts).Lock},
		{"Reentrant", "lock:{fence-r}", func(ctx context.Context, key string) (lock.Lease, error) {
			return NewReentrant(rdb, opts).Lock(lock.WithOwner(ctx, "o"), key)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			floorCalls, floor = 0, 1000
			var last int64 = -1
			for i := range 5 {
				l, err := tt.lock(bg, tt.key)
				if err != nil {
					t.Fatalf("Lock #%d = %v", i+1, err)
				}
				if l.Fence().Token <= last {
					t.Errorf("Lock #%d fence = %d, previous %d: want strictly increasing", i+1, l.Fence().Token, last)
				}
				if i == 0 && l.Fence().Token <= floor {
					t.Errorf("first fence = %d, floor %d: want above the floor", l.Fence().Token, floor)
				}
				last = l.Fence().Token
				if err := l.Release(bg); err != nil {
					t.Fatalf("Release #%d = %v", i+1, err)
				}
			}
			if floorCalls != 1 {
				t.Errorf("FenceFloor called %d times in 5 acquisitions, want once (only while the counter is missing)", floorCalls)
			}
			// Redis loses everything; storage has seen fences up to 5000.
			if err := rdb.FlushAll(bg).Err(); err != nil {
				t.Fatalf("FLUSHALL: %v", err)
			}
			floor = 5000
			l, err := tt.lock(bg, tt.key)
			if err != nil {
				t.Fatalf("Lock after FLUSHALL = %v", err)
			}
			if l.Fence().Token <= floor {
				t.Errorf("fence after FLUSHALL with floor %d = %d, want above the floor", floor, l.Fence().Token)
			}
			if floorCalls != 2 {
				t.Errorf("FenceFloor calls after FLUSHALL = %d, want 2", floorCalls)
			}
			if pttl := rdb.PTTL(bg, tt.key).Val(); pttl <= 0 {
				t.Errorf("PTTL of the lock key = %v, want a TTL", pttl)
			}
			if pttl := rdb.PTTL(bg, tt.key+":fence").Val(); pttl != -1 {
				t.Errorf("PTTL of the fence counter = %v, want none (-1): it must survive to stay monotonic", pttl)
			}
			if err := l.Release(bg); err != nil {
				t.Errorf("Release = %v", err)
			}
		})
	}
	// Without FenceFloor, a missing counter starts from 0 in one round trip.
	rec := &recorder{}
	l, err := NewMutex(rdb, Options{Options: lock.Options{Observer: rec}}).Lock(bg, "lock:{fence-nofloor}")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	defer l.Release(bg)
	if l.Fence().Token != 1 || rec.acquired[0].trips != 1 {
		t.Errorf("first Lock without FenceFloor: fence %d in %d round trips, want 1 in 1", l.Fence().Token, rec.acquired[0].trips)
	}
}

// TestMaxHold: the watchdog stops a runaway holder after MaxHold.
func TestMaxHold(t *testing.T) {
	url := sharedRedis(t)
	rec := &recorder{}
	// Renewals every TTL/3 with 2/3 of a second's slack: a loaded machine
	// delays one less than that (at a 150ms TTL the lease could expire
	// before MaxHold ended it).
	r := NewReentrant(client(t, url), Options{Options: lock.Options{TTL: time.Second, Observer: rec}, MaxHold: 1500 * time.Millisecond})
	ctx := lock.WithOwner(context.Background(), "runaway")
	l, err := r.Lock(ctx, "lock:{maxhold}")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	took, done := waitDone(l.Context(), 10*time.Second)
	if !done {
		t.Fatalf("lease context still live 10s into a 1.5s MaxHold")
	}
	cause := context.Cause(l.Context())
	if !errors.Is(cause, lock.ErrMaxHold) || LostReason(cause) != "max_hold" {
		t.Errorf("lease cancelled with cause %v (reason %q), want lock.ErrMaxHold", cause, LostReason(cause))
	}
	if took < 1450*time.Millisecond {
		t.Errorf("MaxHold 1.5s ended the lease after %v, before it", took)
	}
	if ok, _ := rec.renewals(); ok < 2 {
		t.Errorf("%d successful renewals before MaxHold, want the watchdog to have renewed (≥ 2)", ok)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrMaxHold) {
		t.Errorf("Release after MaxHold = %v, want the loss (lock.ErrMaxHold)", err)
	}
}

// TestKindsExcludeEachOther: a Mutex and a Reentrant lock on the same key
// (two strategies switched per request) exclude each other and share one
// fencing counter; neither mistakes the other's hold for an error or its own.
func TestKindsExcludeEachOther(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key = "lock:{kinds}"
	rec := &recorder{}
	m := NewMutex(rdb, Options{Options: lock.Options{TTL: time.Second}, Watchdog: true})
	r := NewReentrant(client(t, url), Options{Options: lock.Options{TTL: time.Second, Observer: rec}})
	owner := lock.WithOwner(bg, "o")

	ml, err := m.Lock(bg, key)
	if err != nil {
		t.Fatalf("Mutex.Lock = %v", err)
	}
	if l, err := r.TryLock(owner, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("Reentrant.TryLock while a Mutex holds %s = %v, %v; want lock.ErrNotAcquired", key, l, err)
	}
	wait := lockAsync(owner, func(ctx context.Context, _, key string) (lock.Lease, error) { return r.Lock(ctx, key) }, "o", key)
	subscribed(t, rdb, key) // the Reentrant waits for the Mutex's release
	if err := ml.Release(bg); err != nil {
		t.Fatalf("Mutex Release = %v", err)
	}
	rl, _, err := wait()
	if err != nil {
		t.Fatalf("Reentrant.Lock waiting for a Mutex holder = %v, want it to wait and acquire", err)
	}
	if rl.Fence().Token <= ml.Fence().Token {
		t.Errorf("Reentrant fence %d after Mutex fence %d, want larger (one counter per key)", rl.Fence().Token, ml.Fence().Token)
	}
	if l, err := m.TryLock(bg, key); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("Mutex.TryLock while a Reentrant holds %s = %v, %v; want lock.ErrNotAcquired", key, l, err)
	}
	// The Reentrant hold is renewed and releasable as usual; a stale Mutex
	// release of the old lease does nothing to it.
	if err := ml.Release(bg); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release of the Mutex lease = %v, want lock.ErrNotHeld", err)
	}
	testenv.WaitFor(t, "two renewals of the Reentrant hold", 10*time.Second, func() bool {
		ok, failed := rec.renewals()
		if failed != 0 {
			t.Fatalf("Reentrant renewals next to a Mutex: %d ok, %d failed; want none failed", ok, failed)
		}
		return ok >= 2
	})
	if err := rl.Err(); err != nil {
		t.Errorf("Reentrant lease after renewals next to a Mutex = %v, want held", err)
	}
	if err := rl.Release(owner); err != nil {
		t.Errorf("Reentrant Release = %v", err)
	}
}

// TestReentrantWaitsOneBudget: two Locks of one owner on a key another
// owner holds: the second waits for the first's turn (the owner's
// operations on a key take turns) and then, the first having given up,
// for the lock itself. Both waits come out of one budget: no Lock returns
// later than Options.Wait after it was called.
func TestReentrantWaitsOneBudget(t *testing.T) {
	url := sharedRedis(t)
	var tries atomic.Int64
	const wait = time.Second
	r := closing(t, NewReentrant(client(t, url, acquireCounter(&tries)), Options{Options: lock.Options{Wait: wait}}))
	bg := context.Background()
	const key = "lock:{re-budget}"
	held, err := NewReentrant(client(t, url), Options{}).Lock(lock.WithOwner(bg, "holder"), key)
	if err != nil {
		t.Fatalf("holder Lock = %v", err)
	}
	defer held.Release(lock.WithOwner(bg, "holder"))
	owner := lock.WithOwner(bg, "o")
	first := make(chan error, 1)
	go func() {
		_, err := r.Lock(owner, key)
		first <- err
	}()
	testenv.WaitFor(t, "the first Lock's try", 5*time.Second, func() bool { return tries.Load() >= 1 })
	start := time.Now()
	_, err = r.Lock(owner, key)
	took := time.Since(start)
	if !errors.Is(err, lock.ErrTimeout) {
		t.Errorf("second Lock of the owner = %v, want lock.ErrTimeout", err)
	}
	if took > wait+wait/2 {
		t.Errorf("second Lock of the owner gave up after %v, want within its %v budget (and some slack)", took, wait)
	} else {
		t.Logf("second Lock of the owner gave up after %v (budget %v)", took, wait)
	}
	if err := <-first; !errors.Is(err, lock.ErrTimeout) {
		t.Errorf("first Lock of the owner = %v, want lock.ErrTimeout", err)
	}
}
