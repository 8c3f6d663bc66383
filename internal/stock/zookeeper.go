package stock

import "inventory/internal/inventory"

// newZooKeeper is the zookeeper strategy: read-check-update inside a
// ZooKeeper lock (an ephemeral sequential node under
// /inventory/locks/lock:{id}, waiters watching their predecessor) released
// after the commit (see fencedSale). Safe: the write is fenced with the lock
// node's czxid (the product's zklock fence) and guarded, so when the lock
// breaks (the holder's session expired while it was paused or cut off)
// Postgres refuses the stale write and the breach is reported instead of an
// oversell; a lease lost while its sale runs (connection lost, session
// expired) cancels the sale's transaction.
func newZooKeeper(d Deps) (*fencedSale, error) { return newFencedSale(d, inventory.ZooKeeper) }
