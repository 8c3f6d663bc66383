package stock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestCommitReplyLost loses the reply to a sale's COMMIT after Postgres
// has committed it (commit-reply-lost), through a proxy between one
// replica's pool and Postgres, for every safe strategy. The sale is in the
// ledger, so Sell must say so: it finds the outcome in the ledger and
// returns the sale, with a nil error, instead of a 5xx that a buyer would
// read as "not sold" (or an unknown outcome, which is only for when the
// ledger cannot be read). With an Idempotency-Key, a retry returns the same
// sale as a replay and sells nothing more. Throughout, a Sell returns a sale
// exactly when its ledger row exists.
func TestCommitReplyLost(t *testing.T) {
	t.Parallel()
	e := newOwnEnv(t)
	proxy, pool := e.commitCutterPool(t)
	// A stalled reply costs the commit timeout: 3s, not the default 10s.
	cut := testDeps{Deps: Deps{Store: postgres.NewStore(pool, postgres.Limits{CommitTimeout: 3 * time.Second}), Redis: e.rdb, Instance: "replica-cut"}, Lock: testLock}

	variants := []struct {
		name string
		arm  func()
		// strategies: a stalled reply costs the commit timeout per sale,
		// so that variant runs one strategy, one lost reply.
		strategies []string
		plain      bool // also a sale without a key
	}{
		{"closed", proxy.Arm, safeNames(), true},
		{"stalled", proxy.ArmStall, safeNames()[:1], false},
	}
	for _, v := range variants {
		for _, name := range v.strategies {
			t.Run(v.name+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				id := "cut-" + v.name + "-" + name
				e.restock(t, id, 10)
				s := e.seller(t, name, cut)
				keyed := inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: "key-" + id}
				plain := inventory.Order{ProductID: id, Quantity: 2}

				type step struct {
					what  string
					order inventory.Order
					arm   bool
					// replays is the 1-based step whose sale this one must replay.
					replays int
				}
				steps := []step{
					{"COMMIT reply lost (" + v.name + ")", keyed, true, 0},
					{"retried with the same key", keyed, false, 1},
				}
				wantQuantity, wantSales := int64(9), int64(1)
				if v.plain {
					steps = append(steps, step{"COMMIT reply lost (" + v.name + "), no key", plain, true, 0})
					wantQuantity, wantSales = 7, 2
				}
				sales := make([]inventory.Sale, len(steps))
				var fresh []inventory.Sale
				for i, st := range steps {
					cutsBefore := proxy.Cuts()
					if st.arm {
						v.arm()
					}
					sale, err := s.Sell(ctx, st.order)
					sales[i] = sale
					call := fmt.Sprintf("step %d (%s): Sell(ctx, %s) with %s", i+1, st.what, formatOrder(st.order), name)
					if st.arm {
						if proxy.Armed() || proxy.Cuts() != cutsBefore+1 {
							proxy.Disarm()
							t.Fatalf("%s = %v: the proxy cut %d COMMIT replies during it (still armed: %v), want 1",
								call, err, proxy.Cuts()-cutsBefore, proxy.Armed())
						}
					}
					switch {
					case errors.Is(err, inventory.ErrOutcomeUnknown):
						t.Errorf("%s = %v; want the sale, found in the ledger (it committed): an unknown outcome is only for a ledger that cannot be read", call, err)
						continue
					case err != nil:
						t.Errorf("%s = %v; want the sale (Postgres committed it)", call, err)
						continue
					}
					if sale.ID == 0 || sale.Quantity != st.order.Quantity || sale.ProductID != id || sale.Strategy != name || sale.Round != 1 {
						t.Errorf("%s = %+v; want a sale of %d of %q by %s in round 1, with its id", call, sale, st.order.Quantity, id, name)
					}
					if st.replays == 0 {
						if sale.Replayed {
							t.Errorf("%s = a replay of sale %d, want a fresh sale", call, sale.ID)
						}
						fresh = append(fresh, sale)
						continue
					}
					want := sales[st.replays-1].ID
					if want == 0 {
						// The first try failed; whatever it said, the retry must
						// return the sale the ledger has under the key.
						if err := e.pool.QueryRow(ctx, `SELECT id FROM sales WHERE idempotency_key = $1`, st.order.IdempotencyKey).Scan(&want); err != nil {
							t.Errorf("%s = sale %d; the ledger has no sale under key %q (%v)", call, sale.ID, st.order.IdempotencyKey, err)
							continue
						}
					}
					if !sale.Replayed || sale.ID != want {
						t.Errorf("%s = sale %d (replayed %v), want a replay of sale %d, step %d's", call, sale.ID, sale.Replayed, want, st.replays)
					}
				}
				// Every fresh sale returned must be in the ledger, and nothing else.
				e.checkSafety(t, name+" with lost COMMIT replies", id, fresh)
				if p := e.product(t, id); p.Quantity != wantQuantity || p.Sales != wantSales {
					t.Errorf("after %d sales whose COMMIT replies were lost and one retry: stock %d, %d ledger rows; want %d and %d",
						wantSales, p.Quantity, p.Sales, wantQuantity, wantSales)
				}
				var n int
				if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM sales WHERE idempotency_key = $1`, keyed.IdempotencyKey).Scan(&n); err != nil || n != 1 {
					t.Errorf("ledger rows with idempotency key %q = %d, %v; want 1 (no double sale on retry)", keyed.IdempotencyKey, n, err)
				}
			})
		}
	}
}

// TestCommitNeverArrives drops a sale's COMMIT before it reaches Postgres
// and closes the connection, for every safe strategy. The client cannot
// tell this from a lost reply, so Sell asks the ledger, which shows no
// sale: a definite ErrUnavailable (a 503 the buyer may retry), not an
// unknown outcome. Nothing is sold, and whatever the strategy held for the
// sale (lua's reserved units) is given back: all 3 units then sell, and
// the next buyer is told sold out.
func TestCommitNeverArrives(t *testing.T) {
	e := newEnv(t)
	proxy, pool := e.commitCutterPool(t)
	cut := testDeps{Deps: Deps{Store: postgres.NewStore(pool, postgres.Limits{}), Redis: e.rdb, Instance: "replica-cut"}, Lock: testLock}
	for _, name := range safeNames() {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id := "unsent-" + name
			e.restock(t, id, 3)
			s := e.seller(t, name, cut)
			o := inventory.Order{ProductID: id, Quantity: 1}

			proxy.ArmUnsent()
			cutsBefore := proxy.Cuts()
			sale, err := s.Sell(ctx, o)
			call := fmt.Sprintf("Sell(ctx, %s) with %s, its COMMIT dropped", formatOrder(o), name)
			if proxy.Armed() || proxy.Cuts() != cutsBefore+1 {
				proxy.Disarm()
				t.Fatalf("%s = %v: the proxy dropped %d COMMITs (still armed: %v), want 1", call, err, proxy.Cuts()-cutsBefore, proxy.Armed())
			}
			if !errors.Is(err, inventory.ErrUnavailable) || errors.Is(err, inventory.ErrOutcomeUnknown) {
				t.Errorf("%s = %+v, %v; want ErrUnavailable, not an unknown outcome (the ledger shows no sale)", call, sale, err)
			}
			if p := e.product(t, id); p.Quantity != 3 || p.Sales != 0 {
				t.Errorf("after %s: stock %d, %d ledger rows; want 3 and 0", call, p.Quantity, p.Sales)
			}

			var sales []inventory.Sale
			for i := range 3 {
				sale, err := s.Sell(ctx, o)
				if err != nil {
					t.Errorf("sale %d of 3 after %s = %v, want a sale (nothing was sold)", i+1, call, err)
					continue
				}
				sales = append(sales, sale)
			}
			if _, err := s.Sell(ctx, o); !errors.Is(err, inventory.ErrSoldOut) {
				t.Errorf("a fourth Sell(ctx, %s) with %s = %v, want ErrSoldOut", formatOrder(o), name, err)
			}
			e.checkSafety(t, name+" after a dropped COMMIT", id, sales)
		})
	}
}

// commitCutterPool starts a commitCutter in front of the env's Postgres and
// returns it with a small pool that connects through it.
func (e *env) commitCutterPool(t *testing.T) (*commitCutter, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(e.pgURL)
	if err != nil {
		t.Fatalf("pgxpool.ParseConfig(%s): %v", e.pgURL, err)
	}
	proxy := newCommitCutter(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgxpool through the proxy: %v", err)
	}
	t.Cleanup(pool.Close)
	return proxy, pool
}
