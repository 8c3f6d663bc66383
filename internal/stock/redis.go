package stock

import "inventory/internal/inventory"

// newRedisLock is the redis strategy: read-check-update inside a Redis SET NX
// PX lock (lock:{id}) released by compare-and-delete after the commit (see
// fencedSale). Safe: the write is fenced with the lock's token (the product's
// redislock fence) and guarded, so when the lock breaks (a pause past its
// TTL, Redis losing the key) Postgres refuses the stale write and the breach
// is reported instead of an oversell. Only the lease time bounds the hold:
// its locker has no watchdog (reentrant and fair have one).
func newRedisLock(d Deps) (*fencedSale, error) { return newFencedSale(d, inventory.RedisLock) }
