package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func database(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	return pool
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("Exec(%q): %v", sql, err)
	}
}

// product writes a product's round as the strategies leave it: its stock
// row and one ledger row per unit sold in the round.
func product(t *testing.T, pool *pgxpool.Pool, id string, round int, initial, quantity, sold int64) {
	t.Helper()
	exec(t, pool, `
		INSERT INTO stock (product_id, name, quantity, initial, round, updated_at) VALUES ($1, $1, $2, $3, $4, now())
		ON CONFLICT (product_id) DO UPDATE SET quantity = $2, initial = $3, round = $4, updated_at = now()`,
		id, quantity, initial, round)
	exec(t, pool, `DELETE FROM sales WHERE product_id = $1 AND round = $2`, id, round)
	for range sold {
		exec(t, pool, `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ($1, $2, 1, 'none', 'test')`, id, round)
	}
}

// sell records one more unit sold in id's round, as an unguarded
// strategy would.
func sell(t *testing.T, pool *pgxpool.Pool, id string, round int) {
	t.Helper()
	exec(t, pool, `UPDATE stock SET quantity = quantity - 1, updated_at = now() WHERE product_id = $1`, id)
	exec(t, pool, `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ($1, $2, 1, 'none', 'test')`, id, round)
}

// observer records what a watchdog reports.
type observer struct {
	mu       sync.Mutex
	violated []Violation
	open     []string
}

func (o *observer) Violated(v Violation) {
	o.mu.Lock()
	o.violated = append(o.violated, v)
	o.mu.Unlock()
}
func (o *observer) CircuitOpen(p []string) {
	o.mu.Lock()
	o.open = p
	o.mu.Unlock()
}

func check(t *testing.T, w *Watchdog) []Violation {
	t.Helper()
	found, err := w.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return found
}

// TestWatchdog walks one product through an oversell: the watchdog sees it,
// opens the circuit on both replicas, an admin closes it, the same evidence
// does not open it again, another oversold unit does, and a restock starts
// a round the circuit does not cover. Products whose stock holds are left
// alone throughout.
func TestWatchdog(t *testing.T) {
	pool := database(t)
	ctx := context.Background()
	product(t, pool, "fine", 1, 10, 4, 6)
	product(t, pool, "sold-out", 1, 5, 0, 5)
	product(t, pool, "hot", 1, 10, 0, 10)

	obs := &observer{}
	a := NewCircuits(pool)
	b := NewCircuits(pool) // another replica's copy
	clk := &clock{now: time.Now()}
	b.now = clk.Now
	w := New(pool, a, Options{Instance: "replica-a", Observer: obs})
	if found := check(t, w); len(found) != 0 {
		t.Fatalf("Check with every invariant kept = %v, want none", found)
	}

	sell(t, pool, "hot", 1) // an oversell: stock -1, 11 units sold of 10
	found := check(t, w)
	want := Violation{Product: "hot", Round: 1, Kind: NegativeStock, Quantity: -1, Initial: 10, Sold: 11}
	if len(found) != 1 || found[0] != want {
		t.Fatalf("Check after an oversell = %v, want [%v]", found, want)
	}
	oc, open := a.Open("hot")
	if !open || oc.Violation != want || oc.OpenedBy != "replica-a" {
		t.Errorf("Open(hot) on the watchdog's replica = %+v, %v; want open with %v", oc, open, want)
	}
	if err := oc.Err(); !errors.Is(err, ErrCircuitOpen) || !containsAll(err.Error(), "stock -1", "initial 10", "11 units") {
		t.Errorf("Circuit.Err() = %v, want ErrCircuitOpen with the evidence", err)
	}
	if _, open := b.Open("hot"); open {
		t.Errorf("Open(hot) on another replica before its refresh = open, want not yet")
	}
	if p, err := b.Refresh(ctx); err != nil || !slices.Equal(p, []string{"hot"}) {
		t.Errorf("Refresh on another replica = %v, %v; want [hot]", p, err)
	}
	if _, open := b.Open("hot"); !open {
		t.Errorf("Open(hot) on another replica after its refresh = closed, want open")
	}
	if _, open := a.Open("fine"); open {
		t.Errorf("Open(fine) = open, want closed: its stock holds")
	}
	if len(obs.violated) != 1 || !slices.Equal(obs.open, []string{"hot"}) {
		t.Errorf("observer saw %v violations and open %v; want 1 and [hot]", obs.violated, obs.open)
	}

	// The same evidence, seen again, is not news.
	if found := check(t, w); len(found) != 1 || len(obs.violated) != 1 {
		t.Errorf("a second Check of the same oversell = %v, %d reported; want it found and reported once", found, len(obs.violated))
	}

	closed, ok, err := b.Close(ctx, "hot")
	if err != nil || !ok || closed.Violation != want {
		t.Fatalf("Close(hot) = %+v, %v, %v; want the circuit closed", closed, ok, err)
	}
	if _, ok, err := b.Close(ctx, "hot"); ok || err != nil {
		t.Errorf("Close(hot) again = %v, %v; want nothing to close", ok, err)
	}
	check(t, w)
	if _, open := a.Open("hot"); open {
		t.Errorf("Open(hot) after an admin closed it, same evidence = open, want closed")
	}

	sell(t, pool, "hot", 1) // one more oversold unit
	check(t, w)
	if oc, open := a.Open("hot"); !open || oc.Quantity != -2 || oc.Sold != 12 {
		t.Errorf("Open(hot) after another oversold unit = %+v, %v; want open again with stock -2, 12 sold", oc, open)
	}

	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, refuses := b.Refuses(ctx, "hot"); !refuses {
		t.Errorf("Refuses(hot) on another replica after its refresh = false, want its sales refused")
	}
	product(t, pool, "hot", 2, 10, 10, 0) // a restock starts round 2
	// The other replica has not refreshed since: its copy still has the
	// circuit, and refuses from memory until its last look at Postgres is
	// RecheckInterval old; then the sale path finds the round moved on and
	// sells.
	if _, open := b.Open("hot"); !open {
		t.Fatalf("Open(hot) on the other replica's stale copy = closed; the test needs it open")
	}
	if _, refuses := b.Refuses(ctx, "hot"); !refuses {
		t.Errorf("Refuses(hot) on another replica within RecheckInterval of its last look = false, want a refusal from memory")
	}
	clk.add(RecheckInterval)
	if _, refuses := b.Refuses(ctx, "hot"); refuses {
		t.Errorf("Refuses(hot) on another replica RecheckInterval after its last look, after the restock = true, want false: round 2 has no circuit")
	}
	if found := check(t, w); len(found) != 0 {
		t.Errorf("Check after the restock = %v, want none", found)
	}
	if _, open := a.Open("hot"); open {
		t.Errorf("Open(hot) in the new round = open, want closed")
	}
}

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rechecks counts the statements a Refuses sends to ask whether a circuit
// is still open.
func rechecks(rec *testenv.Statements) int {
	n := 0
	for _, q := range rec.Sent() {
		if strings.Contains(q.SQL, "FROM stock s LEFT JOIN circuits c") {
			n++
		}
	}
	return n
}

// TestRefusalsAnswerFromMemory: a crowd of buyers of a product whose
// circuit is open is refused from memory; Postgres is asked whether it is
// still open at most once per RecheckInterval, by one of them, so the
// crowd does not queue on the watchdog's small pool. A close through
// another replica is noticed at the first refusal past the interval.
func TestRefusalsAnswerFromMemory(t *testing.T) {
	pool := database(t)
	ctx := context.Background()
	product(t, pool, "broken", 1, 10, 0, 10)
	sell(t, pool, "broken", 1) // oversold
	a := NewCircuits(pool)
	if found := check(t, New(pool, a, Options{Instance: "replica-a"})); len(found) != 1 {
		t.Fatalf("Check after an oversell = %v, want one violation", found)
	}
	cfg := pool.Config().Copy()
	var rec testenv.Statements
	cfg.ConnConfig.Tracer = &rec
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	b := NewCircuits(traced) // another replica's copy, on a 2-connection pool as in cmd/inventory
	clk := &clock{now: time.Now()}
	b.now = clk.Now
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	crowd := func(what string) {
		t.Helper()
		const buyers = 200
		var wg sync.WaitGroup
		var sold atomic.Int64
		start := make(chan struct{})
		for range buyers {
			wg.Go(func() {
				<-start
				if _, refuses := b.Refuses(ctx, "broken"); !refuses {
					sold.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := sold.Load(); n != 0 {
			t.Errorf("%s: %d of %d buyers of a product whose circuit is open were not refused, want all refused", what, n, buyers)
		}
	}
	crowd("200 buyers right after the refresh")
	if n := rechecks(&rec); n != 0 {
		t.Errorf("200 buyers right after a refresh asked Postgres %d times whether the circuit is open, want 0 (the refresh just read it)", n)
	}
	clk.add(RecheckInterval)
	crowd("200 buyers RecheckInterval later")
	if n := rechecks(&rec); n != 1 {
		t.Errorf("200 buyers RecheckInterval after the last look asked Postgres %d times whether the circuit is open, want 1", n)
	}

	if _, ok, err := a.Close(ctx, "broken"); err != nil || !ok {
		t.Fatalf("Close(broken) on the watchdog's replica = %v, %v; want closed", ok, err)
	}
	if _, refuses := b.Refuses(ctx, "broken"); !refuses {
		t.Errorf("Refuses(broken) on the other replica within RecheckInterval of its last look = false, want a refusal from memory")
	}
	clk.add(RecheckInterval)
	if _, refuses := b.Refuses(ctx, "broken"); refuses {
		t.Errorf("Refuses(broken) on the other replica RecheckInterval after its last look, the circuit closed = true, want false")
	}
	if _, open := b.Open("broken"); open {
		t.Errorf("Open(broken) on the other replica once a refusal found it closed = open, want dropped from its copy")
	}
	if n := rechecks(&rec); n != 2 {
		t.Errorf("Postgres asked %d times in all whether the circuit is open, want 2", n)
	}

	// A restock heard of (Recheck) is looked at by the next refused sale,
	// however lately the last look was: its round no circuit covers.
	sell(t, pool, "broken", 1) // new evidence: the circuit opens again
	if found := check(t, New(pool, a, Options{Instance: "replica-a"})); len(found) != 1 {
		t.Fatalf("Check after a second oversell = %v, want one violation", found)
	}
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, open := b.Open("broken"); !open {
		t.Fatalf("Open(broken) after the watchdog found it broken again = closed, want open")
	}
	if _, err := pool.Exec(ctx, `UPDATE stock SET round = round + 1, quantity = 10, initial = 10 WHERE product_id = 'broken'`); err != nil {
		t.Fatal(err)
	}
	b.Recheck("broken")
	before := rechecks(&rec)
	const buyers = 200
	var wg sync.WaitGroup
	var refused atomic.Int64
	start := make(chan struct{})
	for range buyers {
		wg.Go(func() {
			<-start
			if _, refuses := b.Refuses(ctx, "broken"); refuses {
				refused.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	// One looks; the others wait for its answer rather than refuse from
	// memory while it is under way.
	if n := refused.Load(); n != 0 {
		t.Errorf("%d of %d buyers refused right after a restock was heard of (Recheck), want none: the new round has no circuit", n, buyers)
	}
	if n := rechecks(&rec) - before; n != 1 {
		t.Errorf("%d buyers right after a restock was heard of asked Postgres %d times, want 1", buyers, n)
	}
}

// TestARestockHeardDuringARefreshIsLookedAt: a Refresh whose read began
// before a restock committed reads the old round's circuit as current;
// when that restock's announcement (Recheck) came while the read was under
// way, the circuit is looked at by the first refused sale, not refused
// from memory: the new round has no circuit.
func TestARestockHeardDuringARefreshIsLookedAt(t *testing.T) {
	pool := database(t)
	ctx := context.Background()
	product(t, pool, "restocked", 1, 10, 0, 10)
	sell(t, pool, "restocked", 1) // oversold
	a := NewCircuits(pool)
	if found := check(t, New(pool, a, Options{Instance: "replica-a"})); len(found) != 1 {
		t.Fatalf("Check after an oversell = %v, want one violation", found)
	}
	b := NewCircuits(pool)
	clk := &clock{now: time.Now()}
	b.now = clk.Now
	// The restock is heard of as the Refresh begins (the same instant on
	// the test's clock), and the Refresh reads the circuit as if its read
	// came before the restock's commit, which lands right after.
	b.Recheck("restocked")
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE stock SET round = round + 1, quantity = 10, initial = 10 WHERE product_id = 'restocked'`); err != nil {
		t.Fatal(err)
	}
	if c, refuses := b.Refuses(ctx, "restocked"); refuses {
		t.Errorf("Refuses(restocked) right after a restock heard of during the refresh = refused (%v), want a look: the new round has no circuit", c.Err())
	}
}

// TestLedgerMismatch: stock that does not match the ledger (units gone
// without a sale, or a sale without its units) is a violation too.
func TestLedgerMismatch(t *testing.T) {
	pool := database(t)
	product(t, pool, "drift", 1, 10, 5, 4)
	w := New(pool, NewCircuits(pool), Options{Instance: "replica-a"})
	want := Violation{Product: "drift", Round: 1, Kind: LedgerMismatch, Quantity: 5, Initial: 10, Sold: 4}
	if found := check(t, w); len(found) != 1 || found[0] != want {
		t.Errorf("Check = %v, want [%v]", found, want)
	}
}

// TestRunStops: Run checks until its context ends, then returns.
func TestRunStops(t *testing.T) {
	pool := database(t)
	product(t, pool, "hot", 1, 1, -1, 2)
	c := NewCircuits(pool)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); New(pool, c, Options{}).Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, open := c.Open("hot"); open {
			break
		}
		select {
		case <-done:
			t.Fatal("Run returned before its context ended")
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not open the oversold product's circuit within 30s")
		}
	}
	cancel()
	<-done
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestCheckSumsEachRoundByItsIndex: with one product owning most of the
// ledger, the check sums a small product's round through the (product_id,
// round) index. Correlated with the stock row, the sum was planned for an
// average product and scanned the whole ledger at every check (340 ms a
// product, every second, on 1M rows).
func TestCheckSumsEachRoundByItsIndex(t *testing.T) {
	pool := database(t)
	ctx := context.Background()
	product(t, pool, "small", 1, 5, 4, 1)
	product(t, pool, "dominant", 1, 60000, 0, 0)
	exec(t, pool, `INSERT INTO sales (product_id, round, quantity, strategy, instance)
		SELECT 'dominant', 1, 1, 'none', 'test' FROM generate_series(1, 60000)`)
	exec(t, pool, `ANALYZE sales`)
	cfg := pool.Config().Copy()
	var rec testenv.Statements
	cfg.ConnConfig.Tracer = &rec
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	if found := check(t, New(traced, NewCircuits(traced), Options{Instance: "replica-a"})); len(found) != 0 {
		t.Fatalf("check found %+v, want no violation", found)
	}
	sent := rec.Sent()
	var small []pgx.TraceQueryStartData
	for _, q := range sent {
		if strings.Contains(q.SQL, "FROM sales") && slices.Contains(q.Args, any("small")) {
			small = append(small, q)
		}
	}
	if len(small) != 1 {
		t.Fatalf("%d statements sum product small's round on their own, want 1; sent: %v", len(small), sent)
	}
	if text := testenv.Plan(t, pool, small[0]); strings.Contains(text, "Seq Scan on sales") {
		t.Errorf("the check scans the whole ledger for product small:\n%s", text)
	}
}
