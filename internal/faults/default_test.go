package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"inventory/internal/client"
	"inventory/internal/fleet"

	"inventory/internal/testenv"
)

// TestTheFleetDefaultIsWhatPostgresHolds checks, on a two-replica fleet
// that reaches Redis through a Sentinel, that the fleet default is
// Postgres's and nothing else's: every replica follows a switch the moment
// PUT /strategy answers; a Redis key naming an older default (as an old
// snapshot restored, or a replica promoted that missed the switch, would
// leave) changes nothing; a switch whose COMMIT fails changes nothing; and
// a Sentinel failover to a replica whose replication was held back across
// a switch changes nothing. After each, 200 buyers naming no strategy buy
// 50 units, and the ledger must show no oversell and every sale made with
// the default Postgres holds.
func TestTheFleetDefaultIsWhatPostgresHolds(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The fleet starts on none: a replica that falls back to it oversells.
	f, err := fleet.Start(ctx, fleet.Options{
		RedisSentinel: true, NoLockServices: true, NoFsync: true, AdminToken: "tok",
		Env: map[string]string{"INVENTORY_STRATEGY": "none"},
	})
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	db, err := pgx.Connect(ctx, f.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	sold := 0
	buyers := func(t *testing.T, phase, want string) {
		t.Helper()
		sold++
		crowd(ctx, t, f, db, fmt.Sprintf("sku-default-%d", sold), phase, want)
	}

	t.Run("every replica follows the moment PUT /strategy answers", func(t *testing.T) {
		for i, name := range []string{"atomic", "forupdate", "optimistic", "none", "atomic", "redis", "none", "forupdate", "atomic"} {
			if err := f.Client().SetStrategy(ctx, name); err != nil {
				t.Fatalf("switch %d: PUT /strategy %s: %v", i, name, err)
			}
			for _, r := range f.Replicas {
				if got := defaultOf(ctx, t, r); got != name {
					t.Errorf("switch %d to %s: GET /strategy on %s = %q right after PUT answered", i, name, r.Instance, got)
				}
			}
		}
		buyers(t, "after the switches", "atomic")
	})

	t.Run("a Redis key naming an older default changes nothing", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: f.Redis.Addr})
		defer rdb.Close()
		for _, key := range []string{"inventory:strategy"} {
			if err := rdb.Set(ctx, key, "none", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		steady(ctx, t, f, "atomic")
		buyers(t, "with Redis saying none", "atomic")
	})

	t.Run("a switch whose COMMIT fails changes nothing", func(t *testing.T) {
		// A deferred constraint trigger fails the COMMIT itself, after every
		// statement of the switch has run.
		if _, err := db.Exec(ctx, `
			CREATE FUNCTION refuse_none() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF NEW.value = 'none' THEN RAISE EXCEPTION 'refused by the test'; END IF;
				RETURN NEW;
			END $$;
			CREATE CONSTRAINT TRIGGER refuse_none AFTER UPDATE ON settings
				DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_none();`); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := db.Exec(context.WithoutCancel(ctx), `DROP TRIGGER refuse_none ON settings; DROP FUNCTION refuse_none()`); err != nil {
				t.Error(err)
			}
		}()
		if err := f.Client().SetStrategy(ctx, "none"); client.StatusOf(err) != http.StatusServiceUnavailable {
			t.Errorf("PUT /strategy none with its COMMIT refused = %v, want 503", err)
		}
		steady(ctx, t, f, "atomic")
		buyers(t, "after a failed switch to none", "atomic")
	})

	t.Run("a failover to a replica that missed the switch changes nothing", func(t *testing.T) {
		if err := f.Client().SetStrategy(ctx, "none"); err != nil {
			t.Fatalf("PUT /strategy none: %v", err)
		}
		onReplica := redis.NewClient(&redis.Options{Addr: f.RedisReplica.Addr})
		defer onReplica.Close()
		fault := &RedisFailover{}
		injected := make(chan error, 1)
		go func() { injected <- fault.Inject(ctx, Target{Fleet: f, Strategy: "atomic"}) }()
		waitUntil(ctx, t, "the replica's replication to be held back (CLIENT PAUSE)", func() bool {
			clients, err := onReplica.ClientList(ctx).Result()
			return err == nil && strings.Contains(clients, "cmd=client|pause")
		})
		// The switch reaches the primary only.
		if err := f.Client().SetStrategy(ctx, "atomic"); err != nil {
			t.Fatalf("PUT /strategy atomic while replication is held back: %v", err)
		}
		// The fault strikes while a transaction is open, as a sale's would be.
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		err = <-injected
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("Inject: %v", err)
		}
		defer func() {
			if err := fault.Heal(context.WithoutCancel(ctx)); err != nil {
				t.Errorf("Heal: %v", err)
			}
		}()
		// The replicas' failover clients find the new primary by
		// themselves; until then a sale may get 503, never another default.
		waitUntil(ctx, t, "both replicas ready on the new primary", func() bool {
			for _, r := range f.Replicas {
				if _, err := r.Client().Readyz(ctx); err != nil {
					return false
				}
			}
			return true
		})
		steady(ctx, t, f, "atomic")
		buyers(t, "after the failover", "atomic")
	})
}

// defaultOf is GET /strategy on r.
func defaultOf(ctx context.Context, t *testing.T, r *fleet.Replica) string {
	t.Helper()
	name, err := r.Client().Strategy(ctx)
	if err != nil {
		t.Errorf("GET %s/strategy: %v", r.URL, err)
	}
	return name
}

// steady checks that every replica answers GET /strategy with want for a
// while: longer than any cache of a copy elsewhere would take to be read.
func steady(ctx context.Context, t *testing.T, f *fleet.Fleet, want string) {
	t.Helper()
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		for _, r := range f.Replicas {
			if got := defaultOf(ctx, t, r); got != want {
				t.Fatalf("GET /strategy on %s = %q, want %q (what Postgres holds)", r.Instance, got, want)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// crowd stocks product with 50 units and sends 200 buyers at once through
// nginx, naming no strategy and with no admin token; then the ledger must
// show the stock never below zero and every sale made with want.
func crowd(ctx context.Context, t *testing.T, f *fleet.Fleet, db *pgx.Conn, product, phase, want string) {
	t.Helper()
	if _, err := f.Client().Restock(ctx, product, client.RestockRequest{Quantity: 50}); err != nil {
		t.Fatalf("%s: PUT /products/%s: %v", phase, product, err)
	}
	buyer := client.New(f.URL, client.Options{Concurrency: 200})
	defer buyer.CloseIdleConnections()
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[int]int{}
	for range 200 {
		wg.Go(func() {
			<-start
			_, err := buyer.Sell(ctx, client.SaleRequest{ProductID: product, Quantity: 1}, client.SaleOptions{})
			mu.Lock()
			answers[client.StatusOf(err)]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	var quantity, units int64
	if err := db.QueryRow(ctx, `SELECT quantity FROM stock WHERE product_id = $1`, product).Scan(&quantity); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `SELECT strategy, sum(quantity) FROM sales WHERE product_id = $1 GROUP BY strategy`, product)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		by[s] = n
		units += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: answers %v, stock left %d, ledger units by strategy %v", phase, answers, quantity, by)
	if quantity < 0 || units > 50 || int64(answers[http.StatusOK]) != units {
		t.Errorf("%s: stock %d, %d units in the ledger, %d answered 200; want stock >= 0, at most 50 sold, one 200 per unit", phase, quantity, units, answers[http.StatusOK])
	}
	if len(by) != 1 || by[want] == 0 {
		t.Errorf("%s: ledger units by strategy %v, want every sale made with %s", phase, by, want)
	}
}
