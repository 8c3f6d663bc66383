package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
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

// answerLoser is a proxy in front of a fleet that passes every request on
// and every answer back, except the answers to the holds of the first
// lose Idempotency-Keys it sees (a hold without a key counts as a key of
// its own): those reach the fleet, which holds the units and answers, and
// then the buyer's connection is closed with no answer, every time that
// key is sent. That is a lost answer, as a replica killed after its
// commit or a reset connection gives.
type answerLoser struct {
	upstream string
	client   *http.Client
	lose     int

	mu      sync.Mutex
	lost    map[string]int // key → answers lost
	unkeyed int            // holds sent without a key
}

func (l *answerLoser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, l.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := l.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"pay_within"`)) && l.loses(r.Header.Get("Idempotency-Key")) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// loses reports whether the answer to a hold under key is lost, and notes it.
func (l *answerLoser) loses(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if key == "" {
		l.unkeyed++
		key = fmt.Sprintf("(none %d)", l.unkeyed)
	}
	if _, ok := l.lost[key]; !ok && len(l.lost) >= l.lose {
		return false
	}
	l.lost[key]++
	return true
}

// TestALostHoldAnswerIsSettledByItsKey: the answers to five holds are lost
// (the fleet held the units; the buyer heard nothing, however often it
// asked again). Every hold carries an Idempotency-Key — the run's, or one
// of its own when the run has none — and is sent again under it; its
// ledger row, found by the key after the run, settles it as held, so the
// history has no op whose outcome nobody knows and is checked
// LINEARIZABLE, and every invariant of a faulted run holds (the orders
// nobody heard of expire).
func TestALostHoldAnswerIsSettledByItsKey(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f := startOrderFleet(t)
	for _, tc := range []struct {
		name, keys string
		retries    int
	}{
		{"with the run's keys", "sku-orders-lost-keyed", 2},
		{"with keys of their own", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const lose = 5
			loser := &answerLoser{upstream: f.URL, client: &http.Client{}, lose: lose, lost: map[string]int{}}
			proxy := httptest.NewServer(loser)
			defer proxy.Close()
			c := NewClient(proxy.URL, f.AdminToken, 8, nil)
			defer c.Close()
			product := "sku-orders-lost-" + strings.ReplaceAll(tc.name, " ", "-")[:12]
			cfg := Config{Product: product, Stock: 40, Buyers: 80, Concurrency: 8, PostgresURL: f.PostgresURL, Seed: 1, Orders: orderScenario(),
				Spread: time.Second, Keys: tc.keys, Retries: tc.retries,
				// The lost answers are the run's fault, active while the
				// buyers buy: the run is judged as faulted (a buyer without
				// an answer may have bought), and a wave buys after it.
				Strike: func(ctx context.Context, _ func() int64, selling <-chan struct{}) error {
					select {
					case <-selling:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				},
				WaveWithin: 20 * time.Second}
			res, err := Run(ctx, c, cfg, Scenario{Name: "atomic", Safe: true, Sell: []string{"atomic"}}, nil)
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			loser.mu.Lock()
			lost, unkeyed := maps.Clone(loser.lost), loser.unkeyed
			loser.mu.Unlock()
			if unkeyed > 0 {
				t.Errorf("%d holds were sent without an Idempotency-Key, want none", unkeyed)
			}
			if len(lost) != lose {
				t.Fatalf("answers lost under %d keys %v, want %d", len(lost), lost, lose)
			}
			for key, n := range lost {
				if n < 2 {
					t.Errorf("the hold under key %s was sent %d time(s), want it sent again after its answer was lost", key, n)
				}
			}
			h := res.History
			if h == nil || h.Verdict != "LINEARIZABLE" || h.Settled < lose || h.Unknown != 0 {
				t.Fatalf("history %+v, want LINEARIZABLE with at least %d ops settled from the ledger and none unknown", h, lose)
			}
			if res.Verdict != verdict.Safe {
				t.Errorf("verdict %s %q, want %s", res.Verdict, res.Reasons, verdict.Safe)
			}
			t.Logf("lost %v; history %d ops, %d settled, checked in %.2fs; orders %+v", lost, h.Ops, h.Settled, h.Seconds, *res.Orders)
		})
	}
}
