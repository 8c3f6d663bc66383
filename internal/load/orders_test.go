package load

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/fleet"
	"inventory/internal/testenv"
	"inventory/internal/verdict"
)

// The order tests' fleet: the expiry job sweeps every 100 ms and a lock
// lives 2 s, so the sweep's bound is 3.1 s and a run with 1 s holds ends
// in seconds.
const (
	orderSweep = 100 * time.Millisecond
	orderTTL   = 2 * time.Second
)

var orderFleet struct {
	once sync.Once
	f    *fleet.Fleet
	err  error
}

// startOrderFleet is the order tests' shared fleet (two replicas behind
// nginx, no fsync, no lock servers), stopped when the tests end.
func startOrderFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	orderFleet.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		orderFleet.f, orderFleet.err = fleet.Start(ctx, fleet.Options{Replicas: 2, NoFsync: true, NoLockServices: true,
			Env: map[string]string{"INVENTORY_ORDER_SWEEP_INTERVAL": orderSweep.String(), "INVENTORY_LOCK_TTL": orderTTL.String(),
				"INVENTORY_WORK_DELAY": "1ms"}})
	})
	if orderFleet.err != nil {
		t.Fatalf("fleet.Start: %v", orderFleet.err)
	}
	return orderFleet.f
}

func TestMain(m *testing.M) {
	code := m.Run()
	if orderFleet.f != nil {
		_ = orderFleet.f.Stop()
	}
	os.Exit(code)
}

// orderScenario is every kind of holder at once: abandoned carts, cancels,
// payments at the deadline racing the sweep, refunds and shipments, and
// every step sent twice.
func orderScenario() *OrderScenario {
	return &OrderScenario{Hold: 0.7, PayWithin: time.Second, Abandon: 0.3, Cancel: 0.2, PayAtDeadline: 0.2, Refund: 0.3, Ship: 0.5,
		RetrySteps: true, SweepBound: SweepBound(orderTTL, orderSweep)}
}

// runOrders runs the order scenario with strategy against the order fleet.
func runOrders(ctx context.Context, t *testing.T, f *fleet.Fleet, strategy, product string) Result {
	t.Helper()
	c := NewClient(f.URL, f.AdminToken, 8, nil)
	t.Cleanup(c.Close)
	// Spread over three deadlines: buyers keep coming while units come
	// back, so a replica that answers sold-out from a mark it should have
	// forgotten is caught by the history.
	cfg := Config{Product: product, Stock: 40, Buyers: 80, Concurrency: 8, PostgresURL: f.PostgresURL, Seed: 1, Orders: orderScenario(),
		Spread: 3 * time.Second}
	res, err := Run(ctx, c, cfg, Scenario{Name: strategy, Safe: true, Sell: []string{strategy}}, nil)
	if err != nil {
		t.Fatalf("Run(%s with orders) = %v", strategy, err)
	}
	return res
}

// TestOrderScenarioIsSafe: buyers who hold and abandon, cancel, pay at
// the deadline, pay, are refunded or shipped, against two safe strategies
// on a real fleet: every invariant of an order's life read from Postgres
// holds, every held order ends, and the history with its returns is
// linearizable. The run sold out, so units came back after sold-outs.
func TestOrderScenarioIsSafe(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f := startOrderFleet(t)
	for _, strategy := range []string{"atomic", "redis"} {
		t.Run(strategy, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := runOrders(ctx, t, f, strategy, "sku-orders-"+strategy)
			o := res.Orders
			if res.Verdict != verdict.Safe {
				t.Fatalf("verdict %s %q, want %s; orders %+v", res.Verdict, res.Reasons, verdict.Safe, o)
			}
			if o == nil || o.Held == 0 || o.Expired == 0 || o.Cancelled == 0 || o.Paid+o.Shipped == 0 || o.StillHeld != 0 {
				t.Errorf("orders %+v: want holds, expiries, cancels and payments, none left held", o)
			}
			if o != nil && o.Returns != int(o.Cancelled+o.Expired+o.Refunded) {
				t.Errorf("%d returns in the history, want one per cancelled, expired and refunded order (%+v)", o.Returns, o)
			}
			if res.History == nil || res.History.Verdict != "LINEARIZABLE" {
				t.Errorf("history %+v, want LINEARIZABLE", res.History)
			}
			t.Logf("%s: %d sold, %d sold out; orders %+v; history %d ops in %.2fs", strategy, res.OK, res.SoldOut, *o, res.History.Ops, res.History.Seconds)
		})
	}
}

// TestADoctoredOrderBreaksTheRun: the same run, then an expired order's
// row changed to paid behind the service's back (its units already
// returned): the orders read again from Postgres and judged are ORDERS
// BROKEN, naming the order.
func TestADoctoredOrderBreaksTheRun(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f := startOrderFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const product = "sku-orders-doctored"
	res := runOrders(ctx, t, f, "atomic", product)
	if res.Verdict != verdict.Safe {
		t.Fatalf("before doctoring: verdict %s %q, want %s", res.Verdict, res.Reasons, verdict.Safe)
	}
	db, err := pgx.Connect(ctx, f.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	var id string
	if err := db.QueryRow(ctx, `UPDATE orders SET state = 'paid' WHERE id = (SELECT id FROM orders WHERE product_id = $1 AND round = $2 AND state = 'expired' LIMIT 1) RETURNING id::text`,
		product, res.Round).Scan(&id); err != nil {
		t.Fatalf("doctor an expired order: %v", err)
	}
	tr, err := newPGTruth(ctx, f.PostgresURL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	ord := &orders{s: *orderScenario(), pg: tr, ids: []string{product}, logs: map[string]*orderLog{}, seen: map[string]time.Time{}}
	ev := res.Evidence
	again, err := ord.evidence(ctx, []int64{res.Round}, nil)
	if err != nil {
		t.Fatal(err)
	}
	again.Steps = ev.Orders.Steps
	ev.Orders = again
	res.Judge(ev)
	if res.Verdict != verdict.OrdersBroken {
		t.Fatalf("after doctoring order %s: verdict %s %q, want %s", id, res.Verdict, res.Reasons, verdict.OrdersBroken)
	}
	if !slices.ContainsFunc(res.Reasons, func(r string) bool { return strings.Contains(r, "order "+id+" is paid but its units returned") }) {
		t.Errorf("reasons %q, want one naming order %s paid with its units returned", res.Reasons, id)
	}
}
