package stock

import "inventory/internal/inventory"

// newEtcdLock is the etcd strategy: read-check-update inside a lock held in
// etcd (the session's lease, key lock:{id}/<lease>), released after the
// commit (see fencedSale). Safe: the transaction runs under the lease's context,
// cancelled when the session's lease ends or the key goes, and the write is
// fenced with the key's create revision (the product's etcdlock fence) and
// guarded, so a holder paused past its TTL is refused by Postgres instead of
// overselling.
func newEtcdLock(d Deps) (*fencedSale, error) { return newFencedSale(d, inventory.Etcd) }
