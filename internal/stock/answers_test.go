package stock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
)

// TestBuyerGoneMidSale: for every safe strategy, buyers leave (their
// request's context is cancelled) at points spread over the sale, the
// simulated work included, while others buy. Whatever each leaving buyer
// was told, nothing is sold twice and nothing is stranded: afterwards the
// units Postgres still holds can all be bought, one by one, and then the
// product is sold out.
func TestBuyerGoneMidSale(t *testing.T) {
	t.Parallel()
	e := newOwnEnv(t)
	const work = 40 * time.Millisecond
	for _, name := range safeNames() {
		t.Run(name, func(t *testing.T) {
			id := "gone-" + name
			e.restock(t, id, 12)
			a := e.replica(t, name, "replica-a", work)
			b := e.replica(t, name, "replica-b", work)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					// Cancelled at 0, 10, ... 70 ms: before the lock or
					// reservation, in the work, around the write.
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*10*time.Millisecond)
					defer cancel()
					o := inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: fmt.Sprintf("gone-%s-%d", name, i)}
					_, _ = []inventory.Seller{a, b}[i%2].Sell(ctx, o)
				})
				wg.Go(func() {
					if _, err := []inventory.Seller{b, a}[i%2].Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1}); err != nil && !errors.Is(err, inventory.ErrSoldOut) {
						t.Errorf("Sell(%q, 1) by a buyer who stays = %v, want a sale or ErrSoldOut", id, err)
					}
				})
			}
			wg.Wait()
			left := e.checkLedger(t, id).Quantity
			if left < 0 {
				t.Fatalf("stock %d after buyers left mid-sale: oversold", left)
			}
			ctx := context.Background()
			for n := int64(0); n < left; n++ {
				if _, err := []inventory.Seller{a, b}[n%2].Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil {
					t.Fatalf("Sell(%q, 1) #%d of the %d units Postgres holds after buyers left = %v, want a sale (units stranded?)", id, n+1, left, err)
				}
			}
			if _, err := a.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrSoldOut) {
				t.Errorf("Sell(%q, 1) once every unit is sold = %v, want ErrSoldOut", id, err)
			}
			if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sold != 12 {
				t.Errorf("stock %d, %d sold; want 0 and 12", p.Quantity, p.Sold)
			}
		})
	}
}

// TestTwinsRaceForTheLastUnits: for every safe strategy, copies of one order
// (one Idempotency-Key: a buyer's retries, sent to both replicas at once)
// race for the last units. The order is sold once, and every copy is told
// so: none hears "sold out" because its own twin took the units.
func TestTwinsRaceForTheLastUnits(t *testing.T) {
	e := newEnv(t)
	for _, name := range safeNames() {
		t.Run(name, func(t *testing.T) {
			id := "twins-" + name
			e.restock(t, id, 3)
			replicas := []inventory.Seller{e.replica(t, name, "replica-a", 0), e.replica(t, name, "replica-b", 0)}
			o := inventory.Order{ProductID: id, Quantity: 3, IdempotencyKey: "last-units-" + name}
			sales, errs := sellCopies(replicas, o, 8)
			for i := range sales {
				if errs[i] != nil {
					t.Errorf("copy #%d: Sell(%s) = %v, want the one sale", i, formatOrder(o), errs[i])
				} else if sales[i].ID != sales[0].ID {
					t.Errorf("copy #%d: Sell(%s) = sale %d, copy #0 = sale %d; want the same", i, formatOrder(o), sales[i].ID, sales[0].ID)
				}
			}
			if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sales != 1 {
				t.Errorf("stock %d, %d ledger rows; want 0 and 1", p.Quantity, p.Sales)
			}
		})
	}
}

// sellCopies sends n copies of o at once, behind a start gate, alternately
// to each of replicas, and returns every copy's answer.
func sellCopies(replicas []inventory.Seller, o inventory.Order, n int) ([]inventory.Sale, []error) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	sales := make([]inventory.Sale, n)
	errs := make([]error, n)
	for i := range sales {
		wg.Go(func() {
			<-start
			sales[i], errs[i] = replicas[i%len(replicas)].Sell(context.Background(), o)
		})
	}
	close(start)
	wg.Wait()
	return sales, errs
}
