package redislock

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/localstack"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// kind is a way to lock with a watchdog, for tests that run on both.
type kind struct {
	name string
	lock func(ctx context.Context, rdb redis.UniversalClient, opts Options, key string) (lock.Lease, error)
	// forge recreates the key as the hold l had it, with a TTL of ttl, to
	// see whether anything still renews it.
	forge func(ctx context.Context, rdb redis.UniversalClient, l lock.Lease, ttl time.Duration) error
}

var watchdogKinds = []kind{
	{"Mutex+Watchdog",
		func(ctx context.Context, rdb redis.UniversalClient, opts Options, key string) (lock.Lease, error) {
			opts.Watchdog = true
			return NewMutex(rdb, opts).Lock(ctx, key)
		},
		func(ctx context.Context, rdb redis.UniversalClient, l lock.Lease, ttl time.Duration) error {
			return rdb.Set(ctx, l.Key(), fmt.Sprintf("%s:%d", l.(*Lease).h.token, l.Fence().Token), ttl).Err()
		}},
	{"Reentrant",
		func(ctx context.Context, rdb redis.UniversalClient, opts Options, key string) (lock.Lease, error) {
			if _, ok := lock.OwnerFrom(ctx); !ok {
				ctx = lock.WithOwner(ctx, "holder")
			}
			return NewReentrant(rdb, opts).Lock(ctx, key)
		},
		func(ctx context.Context, rdb redis.UniversalClient, l lock.Lease, ttl time.Duration) error {
			if err := rdb.HSet(ctx, l.Key(), "holder", 1, "\x00tok", l.(*Lease).h.token, "\x00fence", l.Fence().Token).Err(); err != nil {
				return err
			}
			return rdb.PExpire(ctx, l.Key(), ttl).Err()
		}},
}

// TestUnrenewedLockExpires: without a watchdog the key is gone after its
// TTL; the lease's deadline comes no later than Redis can expire the key,
// and the lease context is cancelled as expired.
func TestUnrenewedLockExpires(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const key, ttl = "lock:{expire}", 200 * time.Millisecond
	rec := &recorder{}
	m := NewMutex(rdb, Options{Options: lock.Options{TTL: ttl, Observer: rec}})
	start := time.Now()
	l, err := m.Lock(bg, key)
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	// The key's TTL starts when Redis runs the SET, after start: a
	// deadline within the TTL from start ends the lease no later than the
	// key (that the context is then cancelled in time is the scheduler's).
	if dl := l.(*Lease).Deadline(); !dl.After(start) || dl.After(start.Add(ttl)) {
		t.Errorf("Deadline() is %v after the Lock call began, want within its %v TTL", dl.Sub(start), ttl)
	}
	var gone time.Duration
	testenv.WaitFor(t, key+" to expire", 5*time.Second, func() bool {
		gone = time.Since(start)
		return rdb.Exists(bg, key).Val() == 0
	})
	// Not before its TTL (how long after is the machine's): nothing
	// deleted it early.
	if gone < ttl-20*time.Millisecond {
		t.Errorf("key gone %v after Lock, before its %v TTL", gone, ttl)
	}
	if _, done := waitDone(l.Context(), 10*time.Second); !done {
		t.Fatalf("key expired but the lease context is still live 10s later")
	}
	if cause := context.Cause(l.Context()); LostReason(cause) != "expired" {
		t.Errorf("lease cancelled with %v (reason %q), want lock.ErrLost+lock.ErrExpired", cause, LostReason(cause))
	}
	if err := l.Err(); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Err() after expiry = %v, want lock.ErrLost", err)
	}
	l2, err := m.TryLock(bg, key)
	if err != nil {
		t.Fatalf("TryLock after the first lock expired = %v", err)
	}
	if err := l.Release(bg); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Release of the expired lease = %v, want lock.ErrLost", err)
	}
	if err := l2.Err(); err != nil || rdb.Exists(bg, key).Val() != 1 {
		t.Errorf("the expired lease's Release touched the new holder's lock: Err() = %v, EXISTS = %d", err, rdb.Exists(bg, key).Val())
	}
	if err := l2.Release(bg); err != nil {
		t.Errorf("Release = %v", err)
	}
	if n := len(rec.renewed); n != 0 {
		t.Errorf("Mutex without Watchdog renewed %d times", n)
	}
}

// TestWatchdogKeepsAliveThenStops: while held the key outlives 2×TTL (it
// is renewed every TTL/3: six renewals in a row with the key never gone);
// after release nothing renews it any more, even a key forged with our
// token. The TTL leaves a renewal TTL×2/3 of slack, which a loaded machine
// running the race detector needs (at 150ms, 8 test binaries at once lost
// leases to late renewals).
func TestWatchdogKeepsAliveThenStops(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const ttl = time.Second
	for _, k := range watchdogKinds {
		t.Run(k.name, func(t *testing.T) {
			rec := &recorder{}
			key := "lock:{alive-" + k.name + "}"
			l, err := k.lock(bg, rdb, Options{Options: lock.Options{TTL: ttl, Observer: rec}}, key)
			if err != nil {
				t.Fatalf("Lock = %v", err)
			}
			first := l.(*Lease).Deadline()
			testenv.WaitFor(t, "six renewals (2×TTL)", 30*time.Second, func() bool {
				if pttl := rdb.PTTL(bg, key).Val(); pttl <= 0 {
					t.Fatalf("PTTL = %v during a hold with TTL %v, want the watchdog to keep it", pttl, ttl)
				}
				if err := l.Err(); err != nil {
					t.Fatalf("Err() = %v during the hold", err)
				}
				ok, failed := rec.renewals()
				if failed != 0 {
					t.Fatalf("renewals: %d ok, %d failed; want none failed", ok, failed)
				}
				return ok >= 6
			})
			if !l.(*Lease).Deadline().After(first.Add(ttl)) {
				t.Errorf("Deadline() %v after the first after six renewals, want renewals to advance it past a TTL", l.(*Lease).Deadline().Sub(first))
			}
			if err := l.Release(bg); err != nil {
				t.Fatalf("Release = %v", err)
			}
			okAtRelease, failedAtRelease := rec.renewals()

			// Forge the key back with our token for half a TTL: a watchdog
			// still running (renewing every TTL/3) would renew it.
			if err := k.forge(bg, rdb, l, ttl/2); err != nil {
				t.Fatalf("forge: %v", err)
			}
			// Its TTL runs out on Redis's clock; a renewal would push it up.
			prev := ttl / 2
			testenv.WaitFor(t, "the forged key to expire", 30*time.Second, func() bool {
				pttl := rdb.PTTL(bg, key).Val()
				if pttl > prev {
					t.Fatalf("after Release, PTTL went up from %v to %v: something still renews", prev, pttl)
				}
				prev = pttl
				return pttl < 0
			})
			if ok, failed := rec.renewals(); ok+failed != okAtRelease+failedAtRelease {
				t.Errorf("%d renewal attempts after Release, want 0", ok+failed-okAtRelease-failedAtRelease)
			}
		})
	}
}

// TestLossCancelsLease: the key deleted or expired under the holder (a clock
// jump, an operator, a failover) cancels the lease context within about
// TTL/3, and the holder never takes it back.
func TestLossCancelsLease(t *testing.T) {
	url := sharedRedis(t)
	rdb := client(t, url)
	bg := context.Background()
	const ttl = time.Second // a renewal's slack (2/3 of it) outlasts a loaded machine's delays
	faults := []struct {
		name string
		do   func(key string) error
	}{
		{"DEL", func(key string) error { return rdb.Del(bg, key).Err() }},
		{"PEXPIRE 1", func(key string) error { return rdb.PExpire(bg, key, time.Millisecond).Err() }},
	}
	for _, k := range watchdogKinds {
		for _, f := range faults {
			t.Run(k.name+"/"+f.name, func(t *testing.T) {
				rec := &recorder{}
				key := fmt.Sprintf("lock:{loss-%s-%s}", k.name, f.name)
				l, err := k.lock(bg, rdb, Options{Options: lock.Options{TTL: ttl, Observer: rec}}, key)
				if err != nil {
					t.Fatalf("Lock = %v", err)
				}
				if err := f.do(key); err != nil {
					t.Fatalf("%s %s: %v", f.name, key, err)
				}
				// Someone else takes the free key at once; the old holder must
				// neither renew it, nor take it back, nor release it.
				testenv.WaitFor(t, key+" to be gone", 5*time.Second, func() bool { return rdb.Exists(bg, key).Val() == 0 })
				other, err := k.lock(lock.WithOwner(bg, "other"), client(t, url), Options{Options: lock.Options{TTL: 10 * time.Second}}, key)
				if err != nil {
					t.Fatalf("Lock by another holder after %s = %v", f.name, err)
				}
				otherFence := other.Fence().Token
				if _, done := waitDone(l.Context(), 3*ttl); !done {
					t.Fatalf("after %s the lease context is still live %v later, want cancelled within about TTL/3 (%v)", f.name, 3*ttl, ttl/3)
				}
				// Told by a renewal (reason not_owner, below), not by the
				// lease running out (expired); how soon is the machine's.
				cause := context.Cause(l.Context())
				if !errors.Is(cause, lock.ErrLost) || LostReason(cause) != "not_owner" {
					t.Errorf("cause = %v (reason %q), want lock.ErrLost with reason not_owner", cause, LostReason(cause))
				}
				var le *lock.Error
				if !errors.As(cause, &le) || le.Key != key {
					t.Errorf("cause %v does not carry the key %q", cause, key)
				}
				if losses := rec.losses(); len(losses) != 1 || !errors.Is(losses[0], lock.ErrLost) {
					t.Errorf("Observer.Lost calls = %v, want one lock.ErrLost", losses)
				}
				if err := l.Release(bg); !errors.Is(err, lock.ErrLost) {
					t.Errorf("Release after the loss = %v, want lock.ErrLost", err)
				}
				if err := other.Err(); err != nil || otherFence <= l.Fence().Token {
					t.Errorf("the new holder after the old one's loss and release: Err() = %v, fence %d (old %d); want held, larger fence", err, otherFence, l.Fence().Token)
				}
				if err := other.Release(bg); err != nil {
					t.Errorf("the new holder's Release = %v, want nil (the old holder must not have freed it)", err)
				}
			})
		}
	}
}

// TestRedisRestartWhileHeld: a restart loses every key; the holder learns
// it before it calls Release, and a later lock works and renews normally.
func TestRedisRestartWhileHeld(t *testing.T) {
	leakCheck(t)
	srv := testenv.RedisServer(t)
	rdb := client(t, srv.URL)
	bg := context.Background()
	const ttl = 2 * time.Second // slack for the new hold's renewals (at 600ms, one was late under load)
	for _, k := range watchdogKinds {
		t.Run(k.name, func(t *testing.T) {
			key := "lock:{restart-" + k.name + "}"
			l, err := k.lock(bg, rdb, Options{Options: lock.Options{TTL: ttl}}, key)
			if err != nil {
				t.Fatalf("Lock = %v", err)
			}
			if err := srv.Restart(bg); err != nil {
				t.Fatalf("restart redis-server: %v", err)
			}
			if _, done := waitDone(l.Context(), 10*time.Second); !done {
				t.Fatalf("10s after a Redis restart the lease context is still live")
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, lock.ErrLost) {
				t.Errorf("cause after restart = %v, want lock.ErrLost", cause)
			}
			if err := l.Release(bg); !errors.Is(err, lock.ErrLost) {
				t.Errorf("Release after restart = %v, want lock.ErrLost", err)
			}
			rec := &recorder{}
			l2, err := k.lock(bg, rdb, Options{Options: lock.Options{TTL: ttl, Observer: rec}}, key)
			if err != nil {
				t.Fatalf("Lock after restart = %v", err)
			}
			// Renewed every TTL/3: four renewals keep it past its TTL.
			testenv.WaitFor(t, "four renewals of the new hold", 30*time.Second, func() bool {
				if err := l2.Err(); err != nil {
					t.Fatalf("new hold: Err() = %v", err)
				}
				ok, _ := rec.renewals()
				return ok >= 4
			})
			if pttl := rdb.PTTL(bg, key).Val(); pttl <= 0 {
				t.Errorf("new hold after four renewals: PTTL = %v, want renewed", pttl)
			}
			if err := l2.Release(bg); err != nil {
				t.Errorf("Release of the new hold = %v", err)
			}
		})
	}
}

// TestRenewalsFailingPastDeadline: Redis stops answering (SIGSTOP); the
// lease is presumed lost at its validity deadline, not at some timeout.
func TestRenewalsFailingPastDeadline(t *testing.T) {
	leakCheck(t)
	srv := testenv.RedisServer(t)
	rdb := client(t, srv.URL)
	bg := context.Background()
	const ttl = 400 * time.Millisecond
	for _, k := range watchdogKinds {
		t.Run(k.name, func(t *testing.T) {
			key := "lock:{stop-" + k.name + "}"
			l, err := k.lock(bg, rdb, Options{Options: lock.Options{TTL: ttl}}, key)
			if err != nil {
				t.Fatalf("Lock = %v", err)
			}
			if err := localstack.Pause(srv.Pid()); err != nil {
				t.Fatalf("pause redis-server: %v", err)
			}
			stopped := time.Now()
			_, done := waitDone(l.Context(), 3*ttl)
			_ = syscall.Kill(srv.Pid(), syscall.SIGCONT)
			if !done {
				t.Fatalf("Redis stopped for %v: the lease context is still live", 3*ttl)
			}
			// Presumed lost by its validity deadline: reason expired, below.
			if cause := context.Cause(l.Context()); LostReason(cause) != "expired" {
				t.Errorf("cause = %v (reason %q), want lock.ErrLost+lock.ErrExpired", cause, LostReason(cause))
			}
			if !l.(*Lease).Deadline().Before(stopped.Add(ttl)) {
				t.Errorf("Deadline() %v after SIGSTOP, want before the TTL ran out", l.(*Lease).Deadline().Sub(stopped))
			}
			if err := l.Release(bg); !errors.Is(err, lock.ErrLost) {
				t.Errorf("Release after the presumed loss = %v, want lock.ErrLost", err)
			}
		})
	}
}
