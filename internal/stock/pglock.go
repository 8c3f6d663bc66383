package stock

import "inventory/internal/inventory"

// newPgLock is the pglock strategy: read-check-update inside a lock held in a
// Postgres table (row lock:{id}, a lease on Postgres's clock) released by
// token after the commit (see fencedSale). Safe: the write is fenced with the
// lock's token (the product's pglock fence, a row of fences) and guarded, so
// when the lock breaks (a pause past its TTL) Postgres refuses the stale
// write and the breach is reported instead of an oversell.
func newPgLock(d Deps) (*fencedSale, error) { return newFencedSale(d, inventory.PgLock) }
