package stock

import (
	"context"
	"errors"
	"testing"

	"inventory/internal/inventory"
	"inventory/internal/lock/backend"
	"inventory/internal/lock/memlock"
)

// TestANewBackendSellsThroughTheGenericFencedSale: a lock backend no line
// of stock names (memlock, the example of docs/adding-a-backend.md),
// opened by its descriptor alone, sells through the one fenced sale: its
// leases' fences are claimed in a fences row of its own counter, which
// appears without a migration, and a holder whose token is not above that
// fence (a second memlock server, a counter started again from 1) is
// refused as a breach, without a sale.
func TestANewBackendSellsThroughTheGenericFencedSale(t *testing.T) {
	e := newEnv(t)
	const id = "new-backend"
	e.restock(t, id, 5)
	ctx := context.Background()
	seller := func(s *memlock.Server) inventory.Seller {
		t.Helper()
		open, err := s.Descriptor().Open(ctx, backend.Config{Options: testLock.Options})
		if err != nil {
			t.Fatalf("open memlock: %v", err)
		}
		t.Cleanup(open.Close)
		l, err := open.Locker("")
		if err != nil {
			t.Fatalf("memlock's Locker: %v", err)
		}
		d := e.deps("replica-a").build(t)
		return replaying{store: d.Store, next: &fencedSale{d: d, name: "memlock-example", lk: l}}
	}
	s := seller(memlock.NewServer())
	for i := range 2 {
		sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		if err != nil || sale.Fence != int64(i+1) || sale.Remaining != int64(4-i) {
			t.Fatalf("sale %d: Sell(%q, 1) = %+v, %v; want sold with fence %d, %d left", i+1, id, sale, err, i+1, 4-i)
		}
	}
	if f, err := e.store.Fence(ctx, memlock.Backend, id); err != nil || f != 2 {
		t.Errorf("the product's %s fence = %d, %v; want 2, the last sale's token", memlock.Backend, f, err)
	}

	restarted := seller(memlock.NewServer()) // its counter starts at 1 again
	if _, err := restarted.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrLockBreach) || !errors.Is(err, inventory.ErrLockLost) {
		t.Errorf("Sell with token 1 after the fence reached 2 = %v, want ErrLockBreach and ErrLockLost", err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 3 || p.Sales != 2 {
		t.Errorf("stock %d, %d ledger rows; want 3 and 2", p.Quantity, p.Sales)
	}
}
