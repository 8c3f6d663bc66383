package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// step is one Sell in a contract case and what it must return.
type step struct {
	order Order
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
			{order: Order{ProductID: "sell", Quantity: 3}, remaining: 7},
			{order: Order{ProductID: "sell", Quantity: 1}, remaining: 6},
		},
		wantQuantity: 6, wantSales: 2,
	},
	{
		name: "sold out at exactly zero", product: "zero", stock: 2,
		steps: []step{
			{order: Order{ProductID: "zero", Quantity: 1}, remaining: 1},
			{order: Order{ProductID: "zero", Quantity: 1}, remaining: 0},
			{order: Order{ProductID: "zero", Quantity: 1}, err: ErrSoldOut},
			{order: Order{ProductID: "zero", Quantity: 1}, err: ErrSoldOut},
		},
		wantQuantity: 0, wantSales: 2,
	},
	{
		name: "more than the stock is refused", product: "more", stock: 5,
		steps: []step{
			{order: Order{ProductID: "more", Quantity: 6}, err: ErrSoldOut},
			{order: Order{ProductID: "more", Quantity: 5}, remaining: 0},
		},
		wantQuantity: 0, wantSales: 1,
	},
	{
		name: "unknown product", product: "known", stock: 5,
		steps: []step{
			{order: Order{ProductID: "ghost", Quantity: 1}, err: ErrNotFound},
			{order: Order{ProductID: "ghost", Quantity: 1, IdempotencyKey: "ghost-key"}, err: ErrNotFound},
		},
		wantQuantity: 5, wantSales: 0, redisUntouched: true,
	},
	{
		name: "bad product id", product: "ok", stock: 5,
		steps: []step{
			{order: Order{ProductID: "", Quantity: 1}, err: ErrBadProductID},
			{order: Order{ProductID: "ok; DROP TABLE stock", Quantity: 1}, err: ErrBadProductID},
			{order: Order{ProductID: "ok}", Quantity: 1}, err: ErrBadProductID},
			{order: Order{ProductID: strings.Repeat("a", 65), Quantity: 1}, err: ErrBadProductID},
		},
		wantQuantity: 5, wantSales: 0, redisUntouched: true,
	},
	{
		name: "bad quantity", product: "qty", stock: 5,
		steps: []step{
			{order: Order{ProductID: "qty", Quantity: 0}, err: ErrBadQuantity},
			{order: Order{ProductID: "qty", Quantity: -1}, err: ErrBadQuantity},
			{order: Order{ProductID: "qty", Quantity: 1 << 40}, err: ErrBadQuantity},
			{order: Order{ProductID: "qty", Quantity: 0, IdempotencyKey: "qty-key"}, err: ErrBadQuantity},
		},
		wantQuantity: 5, wantSales: 0, redisUntouched: true,
	},
	{
		name: "idempotent replay sells once", product: "idem", stock: 10,
		steps: []step{
			{order: Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k1"}, remaining: 8},
			{order: Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k1"}, remaining: 8, replays: 1},
			{order: Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k2"}, remaining: 6},
			// A replay answers what the first answer said, not today's stock.
			{order: Order{ProductID: "idem", Quantity: 2, IdempotencyKey: "k1"}, remaining: 8, replays: 1},
		},
		wantQuantity: 6, wantSales: 2,
	},
	{
		name: "same key for another order conflicts", product: "conf", stock: 10,
		steps: []step{
			{order: Order{ProductID: "conf", Quantity: 2, IdempotencyKey: "k"}, remaining: 8},
			{order: Order{ProductID: "conf", Quantity: 3, IdempotencyKey: "k"}, err: ErrIdempotencyConflict},
			{order: Order{ProductID: "other", Quantity: 2, IdempotencyKey: "k"}, err: ErrIdempotencyConflict},
		},
		wantQuantity: 8, wantSales: 1,
	},
	{
		name: "replay still answers once sold out", product: "late", stock: 1,
		steps: []step{
			{order: Order{ProductID: "late", Quantity: 1, IdempotencyKey: "late-k"}, remaining: 0},
			{order: Order{ProductID: "late", Quantity: 1}, err: ErrSoldOut},
			{order: Order{ProductID: "late", Quantity: 1, IdempotencyKey: "late-k"}, remaining: 0, replays: 1},
		},
		wantQuantity: 0, wantSales: 1,
	},
}

// TestContract runs every contract case against every strategy.
func TestContract(t *testing.T) {
	for _, name := range Names() {
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
			sales := make([]Sale, len(c.steps))
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
	if _, err := e.store.Product(ctx, "ghost"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Product(ghost) after the cases = %v, want ErrNotFound (no sale may create a product)", err)
	}
}

func formatOrder(o Order) string {
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
	for _, name := range []string{SetNX, RedisLock, Reentrant, Fair, Redlock, Etcd, ZooKeeper, PgLock, Handoff} {
		if s, err := New(name, d); s != nil || !errors.Is(err, ErrNotConfigured) {
			t.Errorf("New(%q) without its locker = %v, %v; want nil, ErrNotConfigured", name, s, err)
		}
	}
}
