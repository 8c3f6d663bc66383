package stock

import (
	"context"
	"errors"
	"sync"
	"testing"

	"inventory/internal/inventory"
)

// blockingSeller holds every Sell until release is closed, announcing each
// on entered.
type blockingSeller struct {
	entered chan string
	release chan struct{}
}

func (b *blockingSeller) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	b.entered <- o.ProductID
	<-b.release
	return inventory.Sale{ProductID: o.ProductID, Quantity: o.Quantity}, nil
}

// TestAdmissionRefusesBeyondTheLimitAtOnce: with 2 buyers of a product
// inside, a third is refused at once with ErrOverloaded, across every seller
// sharing the Admission; another product is unaffected; once the first two
// leave, buyers are admitted again.
func TestAdmissionRefusesBeyondTheLimitAtOnce(t *testing.T) {
	inner := &blockingSeller{entered: make(chan string, 8), release: make(chan struct{})}
	a := NewAdmission(2)
	s1, s2 := a.Wrap(inner), a.Wrap(inner)
	hot := inventory.Order{ProductID: "hot", Quantity: 1}
	var wg sync.WaitGroup
	for _, s := range []inventory.Seller{s1, s2} {
		wg.Go(func() {
			if _, err := s.Sell(context.Background(), hot); err != nil {
				t.Errorf("an admitted Sell = %v, want a sale", err)
			}
		})
	}
	<-inner.entered
	<-inner.entered
	if _, err := s1.Sell(context.Background(), hot); !errors.Is(err, inventory.ErrOverloaded) {
		t.Errorf("a third buyer of %q with 2 inside = %v, want ErrOverloaded", hot.ProductID, err)
	}
	if got := a.Waiting("hot"); got != 2 {
		t.Errorf("Waiting(%q) = %d, want 2 (a refused buyer does not count)", hot.ProductID, got)
	}
	other := sellAsync(s2, inventory.Order{ProductID: "other", Quantity: 1})
	if id := <-inner.entered; id != "other" {
		t.Errorf("entered %q, want \"other\"", id)
	}
	close(inner.release)
	wg.Wait()
	if _, err := other(); err != nil {
		t.Errorf("a buyer of another product = %v, want a sale", err)
	}
	if _, err := s1.Sell(context.Background(), hot); err != nil {
		t.Errorf("a buyer of %q after the two left = %v, want a sale", hot.ProductID, err)
	}
	if got := a.Waiting("hot"); got != 0 {
		t.Errorf("Waiting(%q) after every buyer left = %d, want 0", hot.ProductID, got)
	}
}
