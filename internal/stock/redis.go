package stock

import "inventory/internal/lock/redislock"

// newRedisLock is the redis strategy: read-check-update inside a Redis SET
// NX PX lock (lock:{id}) released by compare-and-delete after the commit
// (see locked). Safe: the write is fenced with the lock's token
// (stock.redis_fence) and guarded, so when the lock breaks (a pause past
// its TTL, Redis losing the key) Postgres refuses the stale write and the
// breach is reported instead of an oversell. Only the lease time bounds
// the hold: no watchdog renews it (reentrant and fair have one).
func newRedisLock(d Deps) *locked {
	opts := d.Lock
	opts.Watchdog = false
	opts.FenceFloor = fenceFloor(d.Store, redisFence)
	return &locked{d: d, name: RedisLock, lk: redislock.NewMutex(d.Redis, opts), fence: redisFence}
}
