package stock

import (
	"context"

	"inventory/internal/lock/etcdlock"
)

// etcdLock runs read-check-update inside a lock held in etcd (etcdlock:
// the session's lease, key lock:{id}/<lease>), released after the commit:
// safe, the transaction runs under the lease's context, cancelled when the
// session's lease ends or the key goes, and the write is fenced with the
// key's create revision (in stock.etcd_fence) and guarded, so a holder
// paused past its TTL is refused by Postgres instead of overselling.
type etcdLock struct {
	d  Deps
	lk *etcdlock.Locker
}

func newEtcdLock(d Deps) *etcdLock { return &etcdLock{d: d, lk: d.Etcd} }

// Sell validates o and sells it by sell, at most once per idempotency key.
func (s *etcdLock) Sell(ctx context.Context, o Order) (Sale, error) {
	return once(ctx, s.d.Store, o, s.sell)
}

// sell takes the product's etcd lock (waiting up to the Locker's Wait,
// else ErrLockTimeout), then claims, reads, checks, works, decrements and
// records the sale under the lease's context, and releases the lock only
// after the commit.
func (s *etcdLock) sell(ctx context.Context, o Order) (Sale, error) {
	// An unknown product must not get a key in etcd.
	if err := s.d.Store.exists(ctx, o.ProductID); err != nil {
		return Sale{}, err
	}
	lease, err := s.lk.Lock(ctx, lockKey(o.ProductID))
	if err != nil {
		return Sale{}, lockErr(err)
	}
	defer release(ctx, lease)
	hold := s.d.Holds.Begin(o.ProductID, Etcd, lease.Fence().Token)
	sale, err := s.d.Store.record(lease.Context(), o, Etcd, s.d.Instance, func(ctx context.Context, t *saleTx) (decrement, error) {
		return fencedCheckThenDecrement(ctx, t, o.Quantity, etcdFence, lease.Fence().Token, s.d.WorkDelay)
	})
	return hold.done(sale, lost(lease, err))
}

var _ Seller = (*etcdLock)(nil)
