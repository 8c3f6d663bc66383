package faults

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/fleet"
	"inventory/internal/localstack"
)

// TestClockJumpExpiresALockAtOnceAndHealBringsTheClockBack starts a real
// redis-server under libfaketime, as a fleet with FakeClock does, sets a
// lock key with PX 30000, and jumps the clock the way clock-jump does: the
// key is gone at once, though its 30 s are far from over on any true
// clock, and TIME reads a minute ahead; Heal puts TIME back to the true
// time, and a key set then lives its full TTL again.
func TestClockJumpExpiresALockAtOnceAndHealBringsTheClockBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := localstack.StartRedisWith(ctx, localstack.RedisOptions{FakeClock: true})
	if err != nil {
		t.Fatalf("StartRedisWith(FakeClock): %v", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()

	skew := func() time.Duration {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return now.Sub(time.Now())
	}
	if d := skew(); d.Abs() > 2*time.Second {
		t.Fatalf("before the jump, Redis's clock is %v off the true time, want ≈ 0", d)
	}
	if err := rdb.Set(ctx, "lock:{sku-1}", "holder-1", 30*time.Second).Err(); err != nil {
		t.Fatalf("SET lock:{sku-1} holder-1 PX 30000: %v", err)
	}

	f := &ClockJump{By: 60 * time.Second}
	if err := f.jump([]*localstack.Redis{r}, f.By); err != nil {
		t.Fatalf("jump: %v", err)
	}
	if d := skew(); d < 58*time.Second || d > 62*time.Second {
		t.Errorf("after a jump of +60s, Redis's clock is %v ahead, want ≈ 60s", d)
	}
	if err := rdb.Get(ctx, "lock:{sku-1}").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET lock:{sku-1} right after the jump = %v, want redis.Nil (expired at once)", err)
	}

	if err := f.Heal(ctx); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	if d := skew(); d.Abs() > 2*time.Second {
		t.Errorf("after Heal, Redis's clock is %v off the true time, want ≈ 0", d)
	}
	if err := rdb.Set(ctx, "lock:{sku-1}", "holder-2", 30*time.Second).Err(); err != nil {
		t.Fatalf("SET lock:{sku-1} holder-2 PX 30000: %v", err)
	}
	if ttl, err := rdb.PTTL(ctx, "lock:{sku-1}").Result(); err != nil || ttl < 28*time.Second {
		t.Errorf("PTTL of a key set after Heal = %v, %v; want ≈ 30s", ttl, err)
	}
}

// TestClockJumpNeedsAFakeClock: on a fleet whose Redis runs on the real
// clock, clock-jump says how to start one instead of striking nothing.
func TestClockJumpNeedsAFakeClock(t *testing.T) {
	var opts fleet.Options
	(&ClockJump{}).Needs(&opts)
	if !opts.FakeClock {
		t.Errorf("ClockJump.Needs left FakeClock off")
	}
	_, err := clockServers(&fleet.Fleet{Redis: &localstack.Redis{Addr: "127.0.0.1:1"}})
	if err == nil {
		t.Errorf("clockServers(a Redis on the real clock) = nil error, want one naming FakeClock")
	}
}

// TestClockJumpRecordsTheLeasesItEnded starts a real redis-server under
// libfaketime and holds, for sku-1, a lock key with 10 s to live and a
// live entry of lua's leases, beside a lock key without a time to live
// and a fencing counter (no leases): a jump of 30 s ends the two leases, and
// the fault's record says so; a jump that moves the clock by nothing ends
// none, and its record says that too.
func TestClockJumpRecordsTheLeasesItEnded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := localstack.StartRedisWith(ctx, localstack.RedisOptions{FakeClock: true})
	if err != nil {
		t.Fatalf("StartRedisWith(FakeClock): %v", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	takeLocks := func() {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{
			rdb.Set(ctx, "lock:{sku-1}", "holder-1", 10*time.Second).Err(),
			rdb.ZAdd(ctx, "stock:{sku-1}:leases", redis.Z{Score: float64(now.Add(10 * time.Second).UnixMilli()), Member: "r1 1 1 1"}).Err(),
			rdb.Set(ctx, "lock:{sku-2}", "forever", 0).Err(),
			rdb.Set(ctx, "lock:{sku-2}:fence", "7", 10*time.Second).Err(),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		by   time.Duration
		want map[string]int
	}{
		{0, map[string]int{}},
		{30 * time.Second, map[string]int{"sku-1": 2}},
	} {
		takeLocks()
		f := &ClockJump{ended: map[string]int{}}
		held, err := heldLeases(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.strike(ctx, []*localstack.Redis{r}, []*redis.Client{rdb}, [][]heldLease{held}, tc.by); err != nil {
			t.Fatalf("strike(%v): %v", tc.by, err)
		}
		if got := f.LeasesEnded(); !maps.Equal(got, tc.want) {
			t.Errorf("a jump of %v: LeasesEnded() = %v, want %v", tc.by, got, tc.want)
		}
		if err := f.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !BreaksLocks(&ClockJump{}) || BreaksLocks(&ReplicaKill{}) {
		t.Errorf("BreaksLocks(clock-jump) = %v, BreaksLocks(replica-kill) = %v; want true, false", BreaksLocks(&ClockJump{}), BreaksLocks(&ReplicaKill{}))
	}
}
