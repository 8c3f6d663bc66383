package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"inventory/internal/inventory"
)

// step is one Sell in a contract case and what it must return.
type step struct {
	order inventory.Order
	// err is the sentinel Sell must return; nil for a sale.
	err error
	// remaining is the stock a successful sale must report.
	remaining int64
	// replays is the 1-based index of an earlier step whose sale this one
	// must return as a replay; 0 for a fresh sale.
	replays int
}

// contractCases run against every strategy, each on a fresh database.
var contractCases = []struct {
	name string
	// product is restocked to stock before the steps, unless stock < 0.
	product string
	stock   int64
	steps   []step
	// after the steps: the product's quantity and ledger rows.
	wantQuantity, wantSales int64
	// redisUntouched: the steps must create no Redis key.
	redisUntouched bool
}{
	{
		name: "sells and reports remaining", product: "sell", stock: 10,
		steps: []step{
			{order: inventory.Order{ProductID: "sell", Quantity: 3}, remaining: 7},
			{order: inventory.Order{ProductID: "sell", Quantity: 1}, remaining: 6},
		},
		wantQuantity: 6, wantSales: 2,
	},
	{
		name: "sold out at exactly zero", product: "zero", stock: 2,
		steps: []step{
			{order: inventory.Order{ProductID: "zero", Quantity: 1}, remaining: 1},
			{order: inventory.Order{ProductID: "zero", Quantity: 1}, remaining: 0},
			{order: inventory.Order{ProductID: "zero", Quantity: 1}, err: inventory.ErrSoldOut},
			{order: inventory.Order{ProductID: "zero", Quantity: 1}, err: inventory.ErrSoldOut},
		},
		wantQuantity: 0, wantSales: 2,
	},
	{
		name: "more than the stock is refused", product: "more", stock: 5,
		steps: []step{
			{order: inventory.Order{ProductID: "more", Quantity: 6}, err: inventory.ErrSoldOut},
			{order: inventory.Order{ProductID: "more", Quantity: 5}, remaining: 0},
		},
		wantQuantity: 0, wantSales: 1,
	},
	{
		name: "unknown product", product: "known", stock: 5,
		steps: []step{
			{order: inventory.Order{ProductID: "ghost", Quantity: 1}, err: inventory.ErrNotFound},
			{order: inventory.Order{ProductID: "ghost", Quantity: 1, IdempotencyKey: "ghost-key"}, err: inventory.ErrNotFound},
		},
		wantQuantity: 5, wantSales: 0, redisUntouched: true,
	},
	{
		name: "bad product id", product: "ok", stock: 5,
		steps: []step{
			{order: inventory.Order{ProductID: "", Quantity: 1}, err: inventory.ErrBadProductID},
			{order: inventory.Order{ProductID: "ok; DROP TABLE stock", Quantity: 1}, err: inventory.ErrBadProductID},
			{order: inventory.Order{ProductID: "ok}", Quantity: 1}, err: inventory.ErrBadProductID},
			{order: inventory.Order{ProductID: strings.Repeat("a", 65), Quantity: 1}, err: inventory.ErrBadProductID},
		},
		wantQuantity: 5, wantSales: 0, redisUntouched: true,
	},
	{
		name: "bad quantity", product: "qty", stock: 5,
		steps: []step{
			{order: inventory.Order{ProductID: "qty", Quantity: 0}, err: inventory.ErrBadQuantity},
			{order: inventory.Order{ProductID: "qty", Quantity: -1}, err: inventory.ErrBadQuantity},
			{order: inventory.Order{ProductID: "qty", Quantity: 1 << 40}, err: inventory.ErrBadQuantity},
			{order: inventory.Order{ProductID: "qty", Quantity: 0, IdempotencyKey: "qty-key"}, err: inventory.ErrBadQuantity},
		},
		wantQuantity: 5, wantSales: 0, redisUntouched: true,
	},
	{
		name: "idempotent replay sells once", product: "idem", stock: 10,
		steps: []step{
			{order: inventory.Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k1"}, remaining: 8},
			{order: inventory.Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k1"}, remaining: 8, replays: 1},
			{order: inventory.Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k2"}, remaining: 6},
			// A replay answers what the first answer said, not today's stock.
			{order: inventory.Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k1"}, remaining: 8, replays: 1},
		},
		wantQuantity: 6, wantSales: 2,
	},
	{
		name: "same key for another order conflicts", product: "conf", stock: 10,
		steps: []step{
			{order: inventory.Order{ProductID: "conf", Quantity: 2, IdempotencyKey: "k"}, remaining: 8},
			{order: inventory.Order{ProductID: "conf", Quantity: 3, IdempotencyKey: "k"}, err: inventory.ErrIdempotencyConflict},
			{order: inventory.Order{ProductID: "other", Quantity: 2, IdempotencyKey: "k"}, err: inventory.ErrIdempotencyConflict},
		},
		wantQuantity: 8, wantSales: 1,
	},
	{
		name: "replay still answers once sold out", product: "late", stock: 1,
		steps: []step{
			{order: inventory.Order{ProductID: "late", Quantity: 1, IdempotencyKey: "late-k"}, remaining: 0},
			{order: inventory.Order{ProductID: "late", Quantity: 1}, err: inventory.ErrSoldOut},
			{order: inventory.Order{ProductID: "late", Quantity: 1, IdempotencyKey: "late-k"}, remaining: 0, replays: 1},
		},
		wantQuantity: 0, wantSales: 1,
	},
}

// TestContract runs every contract case against every strategy.
func TestContract(t *testing.T) {
	for _, name := range inventory.Names() {
		t.Run(name, func(t *testing.T) { contract(t, newEnv(t), name) })
	}
}

// contract runs every contract case against strategy name on e.
func contract(t *testing.T, e *env, name string) {
	seller := e.seller(t, name, e.deps("contract"))
	ctx := context.Background()
	for _, c := range contractCases {
		t.Run(c.name, func(t *testing.T) {
			if c.stock >= 0 {
				e.restock(t, c.product, c.stock)
			}
			keysBefore := e.redisKeys(t)
			sales := make([]inventory.Sale, len(c.steps))
			for i, s := range c.steps {
				sale, err := seller.Sell(ctx, s.order)
				sales[i] = sale
				call := "Sell(" + formatOrder(s.order) + ")"
				if s.err != nil {
					if !errors.Is(err, s.err) {
						t.Errorf("step %d: %s = %v, want %v", i+1, call, err, s.err)
					}
					continue
				}
				if err != nil {
					t.Errorf("step %d: %s = %v, want a sale", i+1, call, err)
					continue
				}
				if sale.Remaining != s.remaining || sale.Quantity != s.order.Quantity || sale.ProductID != s.order.ProductID {
					t.Errorf("step %d: %s = %d of %q, %d remaining; want %d of %q, %d remaining",
						i+1, call, sale.Quantity, sale.ProductID, sale.Remaining, s.order.Quantity, s.order.ProductID, s.remaining)
				}
				if sale.ID == 0 || sale.Strategy != name || sale.Instance != "contract" || sale.Round != 1 || sale.CreatedAt.IsZero() {
					t.Errorf("step %d: %s = %+v, want an id, strategy %q, instance contract, round 1, a time", i+1, call, sale, name)
				}
				if s.replays == 0 {
					if sale.Replayed {
						t.Errorf("step %d: %s replayed sale %d, want a new sale", i+1, call, sale.ID)
					}
				} else if first := sales[s.replays-1]; !sale.Replayed || sale.ID != first.ID {
					t.Errorf("step %d: %s = sale %d (replayed %v), want a replay of sale %d", i+1, call, sale.ID, sale.Replayed, first.ID)
				}
			}
			if c.redisUntouched {
				if after := e.redisKeys(t); !sameKeys(keysBefore, after) {
					t.Errorf("Redis keys changed: before %v, after %v", keysBefore, after)
				}
			}
			p := e.checkLedger(t, c.product)
			if p.Quantity != c.wantQuantity || p.Sales != c.wantSales {
				t.Errorf("after the steps: %q has quantity %d and %d ledger rows, want %d and %d",
					c.product, p.Quantity, p.Sales, c.wantQuantity, c.wantSales)
			}
		})
	}
	if _, err := e.store.Product(ctx, "ghost"); !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("Product(ghost) after the cases = %v, want ErrNotFound (no sale may create a product)", err)
	}
}

func formatOrder(o inventory.Order) string {
	if o.IdempotencyKey != "" {
		return fmt.Sprintf("%q, %d, key %q", o.ProductID, o.Quantity, o.IdempotencyKey)
	}
	return fmt.Sprintf("%q, %d", o.ProductID, o.Quantity)
}

func sameKeys(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestLockStrategiesNeedTheirLocker: a lock strategy whose locker
// Deps.Lockers lacks is not configured, and New gives no seller for it.
func TestLockStrategiesNeedTheirLocker(t *testing.T) {
	e := newEnv(t)
	d := Deps{Store: e.store, Redis: e.rdb, Instance: "replica-a"}
	for _, name := range []string{inventory.SetNX, inventory.RedisLock, inventory.Reentrant, inventory.Fair, inventory.Redlock, inventory.Etcd, inventory.ZooKeeper, inventory.PgLock, inventory.Handoff} {
		if s, err := New(name, d); s != nil || !errors.Is(err, inventory.ErrNotConfigured) {
			t.Errorf("New(%q) without its locker = %v, %v; want nil, ErrNotConfigured", name, s, err)
		}
	}
}
