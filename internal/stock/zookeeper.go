package stock

import (
	"context"

	"inventory/internal/lock/zklock"
)

// zooKeeper runs read-check-update inside a ZooKeeper lock (zklock: an
// ephemeral sequential node under /inventory/locks/lock:{id}, waiters
// watching their predecessor) released after the commit: safe, the write
// is fenced with the lock node's czxid (compared with the other ZooKeeper
// holders', in stock.zookeeper_fence) and guarded, so when the lock breaks
// (the holder's session expired while it was paused or cut off) Postgres
// refuses the stale write and the breach is reported instead of an
// oversell. A lease lost while its sale runs (connection lost, session
// expired) cancels the sale's transaction.
type zooKeeper struct {
	d  Deps
	lk *zklock.Locker
}

func newZooKeeper(d Deps) *zooKeeper { return &zooKeeper{d: d, lk: d.ZooKeeper} }

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *zooKeeper) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's lock (waiting up to the Locker's Wait, else
// ErrLockTimeout), then claims, reads, checks, works, decrements and
// records the sale under the lease's context, and releases the lock only
// after the commit.
func (s *zooKeeper) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get a lock node in ZooKeeper.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, ZooKeeper, lease.Fence().Token)
	sale, err := s.d.Store.record(lease.Context(), o, ZooKeeper, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, zookeeperFence, lease.Fence().Token, s.d.WorkDelay)
	})
	return hold.done(sale, lost(lease, err))
}

var _ Seller = (*zooKeeper)(nil)
