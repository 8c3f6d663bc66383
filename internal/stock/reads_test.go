package stock

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/testenv"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReadsCannotTakeTheSalesConnections: with every connection of the
// reads' pool taken (slow readers), a sale still sells, and a read waits
// for its own pool only.
func TestReadsCannotTakeTheSalesConnections(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	reads, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reads.Close()
	st := postgres.NewStore(e.pool, postgres.Limits{Reads: reads})
	const id = "reads-apart"
	e.restock(t, id, 5)
	held, err := reads.Acquire(ctx) // the one read connection, busy
	if err != nil {
		t.Fatal(err)
	}
	seller := e.seller(t, inventory.Atomic, testDeps{Deps: Deps{Store: st, Redis: e.rdb, Instance: "replica-a"}})
	if _, err := seller.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil {
		t.Errorf("Sell with every read connection taken = %v, want a sale", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := st.Product(rctx, id); err == nil {
		t.Errorf("Product with the reads' one connection taken = nil error, want it to wait for that pool (and time out)")
	}
	held.Release()
	if p, err := st.Product(ctx, id); err != nil || p.Quantity != 4 {
		t.Errorf("Product once a read connection is free = %+v, %v; want 4 left", p, err)
	}
}

// TestSalesSinceCountsOnlyTheNewest: a cursor far behind (the live page's
// first call, ?since=0, on a long ledger) counts the newest postgres.MaxSalesSince
// sales, not the whole ledger.
func TestSalesSinceCountsOnlyTheNewest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.restock(t, "long-ledger", 0)
	if _, err := e.pool.Exec(ctx, `
		INSERT INTO sales (product_id, round, quantity, strategy, instance)
		SELECT 'long-ledger', 1, 1, 'atomic', 'replica-a' FROM generate_series(1, $1)`, postgres.MaxSalesSince+10); err != nil {
		t.Fatal(err)
	}
	by, last, err := e.store.SalesSince(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if by["atomic"] != postgres.MaxSalesSince || last == 0 {
		t.Errorf("SalesSince(0) on %d sales = %v, last %d; want the newest %d counted", postgres.MaxSalesSince+10, by, last, postgres.MaxSalesSince)
	}
	if by, _, err := e.store.SalesSince(ctx, last-3); err != nil || by["atomic"] != 3 {
		t.Errorf("SalesSince(last-3) = %v, %v; want 3", by, err)
	}
}

// TestReadingAProductDoesNotScanALedgerAnotherDominates: when one product
// owns most of the ledger, reading another product sums its round through
// the (product_id, round) index. Summed by a subquery correlated with the
// stock row, the planner planned for an average product and scanned the
// whole ledger (on 1M rows, 265 ms a read; 32 readers took the sales' CPU).
func TestReadingAProductDoesNotScanALedgerAnotherDominates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.restock(t, "dominant", 0)
	e.restock(t, "small", 5)
	if _, err := e.pool.Exec(ctx, `
		INSERT INTO sales (product_id, round, quantity, strategy, instance)
		SELECT 'dominant', 1, 1, 'atomic', 'replica-a' FROM generate_series(1, 60000)`); err != nil {
		t.Fatal(err)
	}
	seller := e.seller(t, inventory.Atomic, testDeps{Deps: Deps{Store: e.store, Redis: e.rdb, Instance: "replica-a"}})
	if _, err := seller.Sell(ctx, inventory.Order{ProductID: "small", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE sales`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	var rec testenv.Statements
	cfg.ConnConfig.Tracer = &rec
	reads, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reads.Close()
	st := postgres.NewStore(e.pool, postgres.Limits{Reads: reads})
	if p, err := st.Product(ctx, "small"); err != nil || p.Sold != 1 {
		t.Fatalf("Product(small) = %+v, %v; want 1 sold", p, err)
	}
	queries := rec.Sent()
	if len(queries) != 1 {
		t.Fatalf("Product sent %d statements, want 1", len(queries))
	}
	if plan := testenv.Plan(t, e.pool, queries[0]); strings.Contains(plan, "Seq Scan on sales") {
		t.Errorf("reading product small scans the whole ledger:\n%s", plan)
	}
}

// TestFarBehindCursorsShareOneCount: every cursor further behind than
// postgres.MaxSalesSince (a new live page's ?since=0) is answered from one count of
// the newest sales, made at most once per Limits.NewestSales however many
// ask, and the cursor it returns leads to an exact count of what came
// after.
func TestFarBehindCursorsShareOneCount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.restock(t, "long-ledger", 0)
	insert := func(n int) {
		t.Helper()
		if _, err := e.pool.Exec(ctx, `
			INSERT INTO sales (product_id, round, quantity, strategy, instance)
			SELECT 'long-ledger', 1, 1, 'atomic', 'replica-a' FROM generate_series(1, $1)`, n); err != nil {
			t.Fatal(err)
		}
	}
	insert(postgres.MaxSalesSince + 10)
	for _, tc := range []struct {
		name       string
		every      time.Duration
		recounted  bool
		afterFirst int64
	}{
		{"counted once an hour", time.Hour, false, 5},
		{"counted every time", time.Nanosecond, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := postgres.NewStore(e.pool, postgres.Limits{NewestSales: tc.every})
			first, last, err := st.SalesSince(ctx, 0)
			if err != nil || first["atomic"] != postgres.MaxSalesSince {
				t.Fatalf("SalesSince(0) = %v, %v; want the newest %d", first, err, postgres.MaxSalesSince)
			}
			insert(5)
			again, last2, err := st.SalesSince(ctx, 0)
			if err != nil || again["atomic"] != postgres.MaxSalesSince {
				t.Fatalf("SalesSince(0) again = %v, %v; want the newest %d", again, err, postgres.MaxSalesSince)
			}
			if recounted := last2 != last; recounted != tc.recounted || (recounted && last2 != last+5) {
				t.Errorf("SalesSince(0) again counted up to %d (the first up to %d); want recounted %v", last2, last, tc.recounted)
			}
			if by, _, err := st.SalesSince(ctx, last2); err != nil || by["atomic"] != tc.afterFirst {
				t.Errorf("SalesSince(%d) = %v, %v; want the %d after it counted exactly", last2, by, err, tc.afterFirst)
			}
		})
	}
}

// TestRoundTotalsAreTheLedger: the totals a product read answers with
// (round_totals, kept by the statement that writes each ledger row) are the
// ledger's own sums, round by round, after every strategy — the unsafe ones,
// which oversell, and batch, which writes many rows in one statement — sold
// one product from two replicas at once and a restock started a new round
// while they did.
func TestRoundTotalsAreTheLedger(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const (
		id      = "totals"
		buyers  = 400
		workers = 32
	)
	d := testDeps{Lock: testLock}
	var names []string
	for _, s := range inventory.Strategies {
		names = append(names, s.Name)
	}
	var replicas []map[string]inventory.Seller
	for _, instance := range []string{"replica-a", "replica-b"} {
		r := e.safeReplica(t, instance, "", d)
		for _, name := range names {
			if r[name] == nil { // the unsafe ones
				dd := d
				dd.Store, dd.Redis, dd.Instance = postgres.NewStore(newPool(t, e.pgURL), postgres.Limits{}), e.newRedis(t), instance
				r[name] = e.seller(t, name, dd)
			}
		}
		replicas = append(replicas, r)
	}
	e.restock(t, id, 150)
	var once sync.Once
	mixBuyers(replicas, names, id, buyers, workers, func(returned int64) {
		if returned >= buyers/3 {
			once.Do(func() {
				if _, err := Restock(ctx, e.store, e.rdb, id, "", 150); err != nil {
					t.Errorf("Restock(%q) mid-way: %v", id, err)
				}
			})
		}
	})

	rows, err := e.pool.Query(ctx, `
		SELECT l.round, l.units, l.n, coalesce(t.units, -1), coalesce(t.sales, -1)
		FROM (SELECT round, sum(quantity) AS units, count(*) AS n FROM sales WHERE product_id = $1 GROUP BY round) l
		LEFT JOIN round_totals t ON t.product_id = $1 AND t.round = l.round
		ORDER BY l.round`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var round int
		var units, n, tUnits, tSales int64
		if err := rows.Scan(&round, &units, &n, &tUnits, &tSales); err != nil {
			t.Fatal(err)
		}
		seen++
		if tUnits != units || tSales != n {
			t.Errorf("%q round %d: round_totals says %d units in %d sales, the ledger %d in %d", id, round, tUnits, tSales, units, n)
		}
		r, err := e.store.Round(ctx, id, round)
		if err != nil || r.Sold != units || r.Sales != n {
			t.Errorf("Round(%q, %d) = %+v, %v; want the ledger's %d units in %d sales", id, round, r, err, units, n)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != 2 {
		t.Errorf("%q: sales in %d rounds, want 2 (a restock mid-way)", id, seen)
	}
	p := e.product(t, id)
	var units, n int64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(quantity), 0), count(*) FROM sales WHERE product_id = $1 AND round = $2`, id, p.Round).Scan(&units, &n); err != nil {
		t.Fatal(err)
	}
	if p.Sold != units || p.Sales != n {
		t.Errorf("Product(%q) = %d units sold in %d sales, the ledger's current round %d in %d", id, p.Sold, p.Sales, units, n)
	}
}
