package stock

import (
	"context"
	"sync"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
)

// local runs none's read-check-update inside an in-process mutex per
// product: NOT safe with several replicas, each of which has its own mutexes.
type local struct {
	d Deps

	mu    sync.Mutex
	locks map[string]*localLock
}

// localLock is one product's mutex with the number of Sells using it, so
// that the map forgets a product when nobody sells it (random ids cannot
// grow it forever).
type localLock struct {
	mu   sync.Mutex
	refs int
}

func newLocal(d Deps) *local { return &local{d: d, locks: make(map[string]*localLock)} }

// Sell sells like none, holding the product's in-process mutex from the read
// to the commit.
func (s *local) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	unlock := s.lock(o.ProductID)
	defer unlock()
	section := s.d.Holds.Begin(o.ProductID, inventory.Local, 0)
	return section.done(s.d.Store.Record(ctx, o, inventory.Local, s.d.Instance, func(ctx context.Context, t *postgres.SaleTx) (postgres.Decrement, error) {
		return checkThenDecrement(ctx, t, o.Quantity, s.d)
	}))
}

// lock takes id's mutex and returns the function that releases it.
func (s *local) lock(id string) (unlock func()) {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &localLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}

// size is the number of products with a mutex in the map, for tests.
func (s *local) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}

var _ inventory.Seller = (*local)(nil)
