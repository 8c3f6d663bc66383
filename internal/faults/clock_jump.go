package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/fleet"
	"inventory/internal/localstack"
)

// ClockJump is clock-jump: one lock server's wall clock jumps forward
// while buyers are inside their critical sections, the seeds' objection to
// Redlock (a Redis node whose clock jumps expires its lock early). Redis
// expires keys by its wall clock, so every lock key, lease and reservation
// it holds that the jump carries past its TTL is gone at once, while its
// holder still believes it holds it. The fleet's Redis (the lock server of
// setnx, redis, reentrant, fair and handoff, and of lua's reservation
// leases) and the first of the three Redlock servers jump together, by By,
// whenever a product none of the injection's jumps has struck yet holds a
// lease there, and a lock TTL after the last jump while any does, while the
// struck runs' buyers are still selling (at most clockJumps times), so that
// every run is struck under a held lease. Heal puts both clocks back, a
// jump backwards that only lengthens the TTLs set meanwhile.
//
// The servers run under libfaketime (fleet.Options.FakeClock, see Needs);
// the service's own clock is untouched (Go reads the clock through the
// vDSO, which libfaketime cannot reach, and a replica's lease timers are
// monotonic anyway).
//
// Its strike is meant to end leases, so it jumps when leases are held and
// says which it ended (LockBreaker): right before each jump it notes every
// lock key with a time to live, and every live entry of lua's leases, on
// the jumping servers; right after, it reads the server's clock again, and
// each noted lease whose expiry the jump carried the clock past was ended
// under its holder. A jump that moved no clock ends none.
type ClockJump struct {
	// By is how far each jump moves the clock; 0: three lock TTLs, at
	// least 3s: past any lock's TTL and lua's reservation lease (2s), and
	// clockJumps of them short of lua's counter TTL (a minute), so it
	// breaks leases, not the counters.
	By time.Duration

	jumped []*localstack.Redis
	mu     sync.Mutex
	ended  map[string]int // by product, this injection's
}

// clockJumps bounds how many times the clock jumps forward in one
// injection (10 jumps of 3 s stay short of lua's counter TTL, a minute).
const clockJumps = 10

// Name implements Fault.
func (*ClockJump) Name() string { return "clock-jump" }

// Scope implements Scoped: the jump strikes every lock on the server.
func (*ClockJump) Scope() Scope { return ScopeFleet }

// Needs implements FleetNeeds: Redis and the first Redlock server under
// libfaketime, and critical sections of at least clockJumpWork. A jump
// breaks a lock at once, but it is only seen when another buyer takes the
// lock before its holder is done: waiters retry on their own timers (an
// expiry sends no release notice), so a holder whose section lasts the
// matrix's 2ms is nearly always gone before anyone looks, and the broken
// lock goes unseen. The fleet is clock-jump's own, so the others keep
// theirs.
func (*ClockJump) Needs(opts *fleet.Options) {
	opts.FakeClock = true
	if opts.Env == nil {
		opts.Env = map[string]string{}
	}
	if d, err := time.ParseDuration(opts.Env["INVENTORY_WORK_DELAY"]); err != nil || d < clockJumpWork {
		opts.Env["INVENTORY_WORK_DELAY"] = clockJumpWork.String()
	}
}

// clockJumpWork is the shortest critical section (INVENTORY_WORK_DELAY)
// clock-jump runs with.
const clockJumpWork = 25 * time.Millisecond

// AppliesTo implements Applicable: only strategies that keep a lock,
// lease or reservation with a TTL on one of the jumping Redis servers: the
// fleet's Redis (Strategy.UsesRedis) or the first of the Redlock servers
// (the lock backend redlockBackend's). A jump of Postgres', etcd's or
// ZooKeeper's clock would be another fault.
func (*ClockJump) AppliesTo(t Target) error {
	return appliesTo(t, func(s Strategy) bool { return s.UsesRedis || s.LockBackend == redlockBackend },
		"its sale keeps no lock or lease with a TTL in Redis")
}

// redlockBackend is the lock backend whose locks live on the fleet's
// Redlock servers (fleet.RedlockServers), the first of which jumps.
const redlockBackend = "redlock"

// Inject implements Fault: it watches the jumping servers for leases held
// (every few milliseconds) and jumps the clocks as soon as a product whose
// lease no jump of this injection has ended yet holds one, or a lock TTL
// after the last jump while any is held, at most clockJumps times, until
// the buyers are done; then it gives the last holders struck a lock TTL to
// notice. A jump on a fixed beat, as before, fell between the bursts of
// paced buyers and ended nothing in most cells: ErrNotStruck when no
// lease was held to jump under before the buyers were done.
func (f *ClockJump) Inject(ctx context.Context, t Target) error {
	servers, err := clockServers(t.Fleet)
	if err != nil {
		return err
	}
	ttl := t.LockTTL
	if ttl <= 0 {
		ttl = time.Second
	}
	by := f.By
	if by <= 0 {
		by = max(3*ttl, 3*time.Second)
	}
	f.mu.Lock()
	f.ended = map[string]int{}
	f.mu.Unlock()
	rdbs := make([]*redis.Client, len(servers))
	for i, r := range servers {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
		defer rdbs[i].Close()
	}
	jumps, last := 0, time.Time{}
	tick := time.NewTicker(clockJumpLook)
	defer tick.Stop()
	for jumps < clockJumps {
		held := make([][]heldLease, len(rdbs))
		fresh, any := false, false
		ended := f.LeasesEnded()
		for i, rdb := range rdbs {
			if held[i], err = heldLeases(ctx, rdb); err != nil {
				return fmt.Errorf("clock-jump: the leases on %s: %w", servers[i].Addr, err)
			}
			for _, l := range held[i] {
				any = true
				fresh = fresh || ended[l.product] == 0
			}
		}
		if fresh || (any && time.Since(last) >= ttl) {
			jumps++
			if err := f.strike(ctx, servers, rdbs, held, time.Duration(jumps)*by); err != nil {
				return err
			}
			last = time.Now()
		}
		select {
		case <-t.Selling:
			if jumps == 0 {
				return fmt.Errorf("clock-jump: no lock or lease was held on the jumping servers while the buyers sold: %w", ErrNotStruck)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return sleep(ctx, ttl)
}

// clockJumpLook is how often clock-jump looks for leases held.
const clockJumpLook = 5 * time.Millisecond

// clockServers is the servers clock-jump moves: the fleet's Redis and the
// first Redlock server, when the fleet has them.
func clockServers(fl *fleet.Fleet) ([]*localstack.Redis, error) {
	servers := []*localstack.Redis{fl.Redis}
	if len(fl.RedlockServers) > 0 {
		servers = append(servers, fl.RedlockServers[0])
	}
	for _, r := range servers {
		if !r.FakeClock() {
			return nil, fmt.Errorf("clock-jump: redis-server on %s runs on the real clock: start the fleet with FakeClock", r.Addr)
		}
	}
	return servers, nil
}

// jump sets every server's clock offset to by, remembering them for Heal.
func (f *ClockJump) jump(servers []*localstack.Redis, by time.Duration) error {
	for _, r := range servers {
		if err := r.SetClock(by); err != nil {
			return fmt.Errorf("clock-jump: %w", err)
		}
		if !slices.Contains(f.jumped, r) {
			f.jumped = append(f.jumped, r)
		}
	}
	return nil
}

// strike jumps servers' clocks to by (rdbs are their clients; held, each
// one's leases read just before) and counts, by product, the leases it
// ended (see ClockJump).
func (f *ClockJump) strike(ctx context.Context, servers []*localstack.Redis, rdbs []*redis.Client, held [][]heldLease, by time.Duration) error {
	if err := f.jump(servers, by); err != nil {
		return err
	}
	for i, rdb := range rdbs {
		if len(held[i]) == 0 {
			continue
		}
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			return fmt.Errorf("clock-jump: the clock of %s after the jump: %w", servers[i].Addr, err)
		}
		f.mu.Lock()
		for _, l := range held[i] {
			if !now.Before(l.expires) {
				f.ended[l.product]++
			}
		}
		f.mu.Unlock()
	}
	return nil
}

// heldLease is a lease held on a server, and when it runs out by the
// server's clock.
type heldLease struct {
	product string
	expires time.Time
}

// heldLeases is every lease held on rdb now: each lock key ("lock…{id}",
// the fencing counters aside, or setnx's "setnx:{id}") with a time to
// live, and each entry of lua's leases ("stock:{id}:leases", a sorted set
// scored by expiry in ms) not yet run out.
func heldLeases(ctx context.Context, rdb *redis.Client) ([]heldLease, error) {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []heldLease
	iter := rdb.Scan(ctx, 0, "*{*}*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		product, ok := hashTag(key)
		if !ok {
			continue
		}
		switch {
		case strings.HasSuffix(key, ":leases"):
			live, err := rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: fmt.Sprint(now.UnixMilli() + 1), Max: "+inf"}).Result()
			if err != nil {
				return nil, err
			}
			for _, z := range live {
				out = append(out, heldLease{product: product, expires: time.UnixMilli(int64(z.Score))})
			}
		case (strings.HasPrefix(key, "lock") && !strings.HasSuffix(key, "fence")) || strings.HasPrefix(key, "setnx:"):
			at, err := rdb.PExpireTime(ctx, key).Result()
			if err != nil {
				return nil, err
			}
			if at > 0 { // -1: no time to live; -2: gone meanwhile
				out = append(out, heldLease{product: product, expires: time.UnixMilli(int64(at / time.Millisecond))})
			}
		}
	}
	return out, iter.Err()
}

// hashTag is the product in key's hash tag, "lock:{sku-1}" → "sku-1".
func hashTag(key string) (string, bool) {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return "", false
	}
	product, _, ok := strings.Cut(rest, "}")
	return product, ok && product != ""
}

// LeasesEnded implements LockBreaker: by product, the leases the last
// injection's jumps carried the clock past while they were held.
func (f *ClockJump) LeasesEnded() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.ended))
	for k, v := range f.ended {
		out[k] = v
	}
	return out
}

// Heal implements Fault: every jumped clock is true again.
func (f *ClockJump) Heal(context.Context) error {
	var errs []error
	for _, r := range f.jumped {
		errs = append(errs, r.SetClock(0))
	}
	f.jumped = nil
	return errors.Join(errs...)
}
