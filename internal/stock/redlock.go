package stock

import "inventory/internal/inventory"

// newRedlock is the redlock strategy: read-check-update inside a Redlock
// (lock:{id} on a majority of N independent Redis servers) released by
// compare-and-delete after the commit (see fencedSale). Safe: the write is
// fenced with the lock's token (a counter kept on a majority of the
// servers, never restarted below what Postgres has seen;
// the product's redlock fence) and guarded, so when Redlock breaks (a server
// restarted empty while held, a pause past the validity) Postgres refuses
// the stale or duplicate write and the breach is reported instead of an
// oversell.
func newRedlock(d Deps) (*fencedSale, error) { return newFencedSale(d, inventory.Redlock) }
