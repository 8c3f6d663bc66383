package stock

import "inventory/internal/inventory"

// newFair is the fair strategy: read-check-update inside the FIFO Redis lock
// on lock:{id}: buyers of a product get the lock in the order they asked for
// it, each woken in turn when the one before releases after its commit (see
// fencedSale). Safe: the write is fenced with the lock's own token (the product's
// redislock/fair fence) and guarded, so when the lock breaks (a pause past
// its TTL, Redis losing the key) Postgres refuses the stale write and the
// breach is reported instead of an oversell. Its locker has a watchdog, which
// keeps a slow sale's lock (a crowd queues on the hot row) and tells the
// holder within TTL/3 when its key is gone.
func newFair(d Deps) (*fencedSale, error) { return newFencedSale(d, inventory.Fair) }
