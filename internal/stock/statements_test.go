package stock

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/testenv"
)

// TestASaleIsOneStatement: once its product is known, a sale by atomic,
// lua, or a lock holder without simulated work sends Postgres one
// statement, one round trip (CALL sell: the guard, the fence, the ledger
// row and the totals, committed on their own). Before issue 38 an atomic
// sale sent four (BEGIN, the guarded UPDATE, the ledger's, COMMIT) and a
// redis sale five (the fence claim besides).
func TestASaleIsOneStatement(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	var rec testenv.Statements
	cfg.ConnConfig.Tracer = &rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d := testDeps{Deps: Deps{Store: postgres.NewStore(pool, postgres.Limits{}), Redis: e.rdb, Instance: "replica-a"}, Lock: testLock}
	for _, name := range []string{inventory.Atomic, inventory.Lua, inventory.RedisLock, inventory.Reentrant, inventory.Redlock, inventory.Etcd} {
		t.Run(name, func(t *testing.T) {
			id := "one-statement-" + name
			e.restock(t, id, 10)
			s := e.seller(t, name, d)
			if _, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil {
				t.Fatalf("first Sell(%q, 1) = %v", id, err)
			}
			before := len(rec.Sent())
			sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
			if err != nil || sale.Remaining != 8 {
				t.Fatalf("second Sell(%q, 1) = %+v, %v; want 8 remaining", id, sale, err)
			}
			var sent []string
			for _, q := range rec.Sent()[before:] {
				sent = append(sent, strings.Join(strings.Fields(q.SQL), " "))
			}
			if len(sent) != 1 || !strings.HasPrefix(sent[0], "CALL sell(") {
				t.Errorf("a %s sale sent Postgres %d statements, want 1 (CALL sell): %q", name, len(sent), sent)
			}
			e.checkLedger(t, id)
		})
	}
}
