package stock

import (
	"context"
	"fmt"
	"sync"

	"inventory/internal/inventory"
)

// Admission bounds how many buyers of one product may be inside one replica
// at once, waiting for a lock, a row or a retry: beyond the limit a buyer is
// refused at once with ErrOverloaded (503 with Retry-After) instead of
// joining a queue that only grows the wait of everybody behind it.
type Admission struct {
	limit int

	mu      sync.Mutex
	waiting map[string]int // product id → buyers inside
}

// NewAdmission admits at most limit buyers per product at once.
func NewAdmission(limit int) *Admission {
	return &Admission{limit: limit, waiting: map[string]int{}}
}

// Wrap returns a Seller that admits an order to s only while fewer than the
// limit of buyers of its product are inside any seller a wraps.
func (a *Admission) Wrap(s inventory.Seller) inventory.Seller {
	return &admittedSeller{admission: a, inner: s}
}

// Waiting is how many buyers of product id are inside now.
func (a *Admission) Waiting(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waiting[id]
}

func (a *Admission) enter(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting[id] >= a.limit {
		return false
	}
	a.waiting[id]++
	return true
}

func (a *Admission) leave(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting[id]--; a.waiting[id] <= 0 {
		delete(a.waiting, id)
	}
}

type admittedSeller struct {
	admission *Admission
	inner     inventory.Seller
}

func (s *admittedSeller) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	if !s.admission.enter(o.ProductID) {
		return inventory.Sale{}, fmt.Errorf("%d buyers of %q are already waiting in this replica: %w", s.admission.limit, o.ProductID, inventory.ErrOverloaded)
	}
	defer s.admission.leave(o.ProductID)
	return s.inner.Sell(ctx, o)
}

var _ inventory.Seller = (*admittedSeller)(nil)
