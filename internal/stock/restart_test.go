package stock

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/localstack"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

// redisFault is a way for Redis server srv to lose every key; inject
// returns once the loss has happened and Redis answers again. rdb is a
// client of srv.
type redisFault struct {
	name   string
	inject func(ctx context.Context, srv *localstack.Redis, rdb *goredis.Client) error
}

var redisLosses = []redisFault{
	{"flushall", func(ctx context.Context, _ *localstack.Redis, rdb *goredis.Client) error {
		return rdb.FlushAll(ctx).Err()
	}},
	{"redis-restart", func(ctx context.Context, srv *localstack.Redis, _ *goredis.Client) error {
		// Killed, not asked to stop: no chance to do anything on the way out.
		if err := syscall.Kill(srv.Pid(), syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill redis-server: %w", err)
		}
		return srv.Restart(ctx)
	}},
}

// midSale is where buyer 1 is held when the fault strikes.
type midSale struct {
	name string
	// applies reports whether the strategy has this window.
	applies func(strategy string) bool
}

var (
	// inWork: buyer 1 is in its simulated work (Deps.WorkDelay), holding
	// whatever the strategy holds there: a lock and an open transaction
	// (redis, reentrant, pglock, optimistic, forupdate), or a reservation (lua).
	inWork = midSale{"in-work", func(s string) bool {
		return slices.Contains([]string{inventory.RedisLock, inventory.Reentrant, inventory.PgLock, inventory.Optimistic, inventory.Lua, inventory.ForUpdate}, s)
	}}
	// atWrite: buyer 1 is blocked on the stock row, which the test holds
	// locked, with everything the strategy took before its write. Every
	// strategy writes the stock row, so this applies to all, including any
	// safe strategy added later.
	atWrite = midSale{"at-write", func(string) bool { return true }}
)

// TestRedisLostMidSale: Redis loses every key (FLUSHALL, or killed and
// restarted empty on the same port) while buyer 1 on replica a is in the
// middle of selling the last unit; then buyer 2 on replica b sells the same
// product, and both finish. Buyer 2's lock, fencing token or counter comes
// from an empty Redis, so only Postgres stands between the two and a
// second sale of one unit: at most 1 unit may be sold, quantity never
// below 0, and every Sell that returned a sale has its ledger row. Breaches
// and 503s are fine (and logged); an unknown outcome is not expected here.
//
// Buyer 1 is caught in one of two places: inside its simulated work (lock
// held, transaction open or units reserved), seen from Redis or Postgres;
// or blocked on the stock row at its write, which the test holds locked
// until buyer 2 has got as far as it can.
func TestRedisLostMidSale(t *testing.T) {
	t.Parallel()
	e := newOwnEnv(t)
	srv := testenv.RedisServer(t) // private: restarting it must not disturb other tests
	long := redislock.Options{Options: lock.Options{TTL: 30 * time.Second, Wait: 10 * time.Second}, MaxBackoff: 8 * time.Millisecond}
	const work = time.Second
	slow := e.safeReplica(t, "replica-a-slow", srv.URL, testDeps{Deps: Deps{WorkDelay: work}, Lock: long})
	fast := e.safeReplica(t, "replica-a", srv.URL, testDeps{Lock: long})
	other := e.safeReplica(t, "replica-b", srv.URL, testDeps{Lock: long})
	rdb := newRedis(t, srv.URL)

	for _, fault := range redisLosses {
		for _, where := range []midSale{inWork, atWrite} {
			for _, name := range safeNames() {
				if !where.applies(name) {
					continue
				}
				t.Run(fault.name+"/"+where.name+"/"+name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					id := fmt.Sprintf("lost-%s-%s-%s", fault.name, where.name, name)
					restockOn(t, e.store, rdb, id, 1)
					o := inventory.Order{ProductID: id, Quantity: 1}

					var wait1, wait2 func() (inventory.Sale, error)
					var seen string
					switch where.name {
					case inWork.name:
						wait1 = sellAsync(slow[name], o)
						seen = waitInWork(t, e, rdb, id, work)
						if err := fault.inject(ctx, srv, rdb); err != nil {
							t.Fatalf("%s: %v", fault.name, err)
						}
						wait2 = sellAsync(other[name], o)
					case atWrite.name:
						release := holdRow(t, e, id)
						wait1 = sellAsync(fast[name], o)
						waitFor(t, "buyer 1 to block on the stock row", 10*time.Second, func() bool { return rowWaiters(e) >= 1 })
						seen = "blocked on the stock row"
						if exists, err := rdb.Exists(ctx, redis.LockKey(id)).Result(); err == nil && exists == 1 {
							seen += ", holding " + redis.LockKey(id)
						}
						if err := fault.inject(ctx, srv, rdb); err != nil {
							release()
							t.Fatalf("%s: %v", fault.name, err)
						}
						wait2 = sellAsync(other[name], o)
						// Let buyer 2 get as far as it can: blocked on the row
						// too, or answered without it. A lock kept outside
						// Redis (pglock's row, etcd's key, ZooKeeper's node, held
						// by buyer 1) survives the loss (so does redlock's, on
						// servers of its own): buyer 2 can get no further than
						// waiting for it.
						done2 := make(chan struct{})
						go func() { wait2(); close(done2) }()
						got := until(10*time.Second, func() bool {
							select {
							case <-done2:
								return true
							default:
								return rowWaiters(e) >= 2 || (name == inventory.PgLock && pgLockHeld(e, id)) ||
									(name == inventory.Etcd && etcdContenders(t, id) >= 2) || (name == inventory.Redlock && redlockHeld(t, id)) ||
									(name == inventory.ZooKeeper && zkQueued(t, id) >= 2)
							}
						})
						if !got {
							t.Errorf("buyer 2 neither blocked on the stock row nor answered within 10s")
						}
						release()
					}
					sale1, err1 := wait1()
					sale2, err2 := wait2()

					label := fmt.Sprintf("%s with %s while buyer 1 was %s", name, fault.name, seen)
					call1 := fmt.Sprintf("buyer 1: Sell(ctx, %s) with %s on replica a", formatOrder(o), name)
					call2 := fmt.Sprintf("buyer 2: Sell(ctx, %s) with %s on replica b after %s", formatOrder(o), name, fault.name)
					t.Logf("%s: %s = %s (%v); %s = %s (%v)", label, call1, outcome(err1), err1, call2, outcome(err2), err2)
					var sales []inventory.Sale
					for _, r := range []struct {
						call string
						sale inventory.Sale
						err  error
					}{{call1, sale1, err1}, {call2, sale2, err2}} {
						switch {
						case r.err == nil:
							sales = append(sales, r.sale)
						case !definite(r.err):
							t.Errorf("%s: %s = %v, want a sale, ErrSoldOut, a breach or a 503-class error", label, r.call, r.err)
						}
					}
					e.checkSafety(t, label, id, sales)
					if p := e.product(t, id); p.Sold > 1 || p.Quantity < 0 {
						t.Errorf("%s: %d units sold of 1, stock %d: oversold", label, p.Sold, p.Quantity)
					}
				})
			}
		}
	}
}

// waitInWork waits until buyer 1 of product id is inside its simulated
// work, which lasts work: its units are reserved in Redis (a reservation
// key of the product exists), or a sale transaction sits idle in Postgres
// (it holds a lock and has begun, or has read the row). It returns what it
// saw, for the log.
func waitInWork(t *testing.T, e *env, rdb *goredis.Client, id string, work time.Duration) string {
	t.Helper()
	ctx := context.Background()
	var seen string
	waitFor(t, fmt.Sprintf("buyer 1 to be inside its simulated work (%v long)", work), 5*time.Second, func() bool {
		if keys, _ := rdb.Keys(ctx, redis.ReservationKey(id, "*")).Result(); len(keys) > 0 {
			seen = "holding reservation " + keys[0]
			return true
		}
		var n int
		err := e.pool.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'`).Scan(&n)
		if err == nil && n > 0 {
			seen = "in an open transaction"
			if exists, err := rdb.Exists(ctx, redis.LockKey(id)).Result(); err == nil && exists == 1 {
				seen += ", holding " + redis.LockKey(id)
			}
			return true
		}
		return false
	})
	return seen
}

// holdRow locks product id's stock row in a transaction of the test's own,
// so that every sale's write waits; the returned function rolls it back.
func holdRow(t *testing.T, e *env, id string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM stock WHERE product_id = $1 FOR UPDATE`, id); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("lock the stock row of %q: %v", id, err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// pgLockHeld reports whether product id's pglock row is held and unexpired.
func pgLockHeld(e *env, id string) bool {
	var held bool
	err := e.pool.QueryRow(context.Background(), `
		SELECT token IS NOT NULL AND expires_at > clock_timestamp() FROM locks WHERE name = $1`, redis.LockKey(id)).Scan(&held)
	return err == nil && held
}

// rowWaiters counts the sessions of the test's database waiting for a row lock.
func rowWaiters(e *env) int {
	var n int
	err := e.pool.QueryRow(context.Background(), `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	if err != nil {
		return 0
	}
	return n
}
