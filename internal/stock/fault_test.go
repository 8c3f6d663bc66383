package stock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/postgres"
	"inventory/internal/redis"
	"inventory/internal/testenv"
)

// waitFor polls cond every 5ms until it holds, failing the test after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sellAsync runs s.Sell(o) in a goroutine; the returned function waits for it.
func sellAsync(s inventory.Seller, o inventory.Order) func() (inventory.Sale, error) {
	var (
		sale inventory.Sale
		err  error
		wg   sync.WaitGroup
	)
	wg.Go(func() { sale, err = s.Sell(context.Background(), o) })
	return func() (inventory.Sale, error) { wg.Wait(); return sale, err }
}

// TestReentrantLockLost deletes the lock key while replica a is inside its
// critical section, and lets replica b take the lock and sell meanwhile.
// With a short TTL a's watchdog notices within TTL/3: a fails with
// ErrLockLost and rolls back, and only b sells. With a long TTL no renewal
// comes before a finishes; a had claimed the stock row with its fencing token
// before b, so b waits for a's commit and sells after it. Either way the
// sales are serialised: no oversell, the ledger matches.
func TestReentrantLockLost(t *testing.T) {
	cases := []struct {
		name      string
		ttl       time.Duration
		wantA     error
		wantStock int64
		wantRows  int64
	}{
		{"watchdog notices", 300 * time.Millisecond, inventory.ErrLockLost, 8, 1},
		{"the row claim orders them", 30 * time.Second, nil, 7, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const id = "fault"
			e.restock(t, id, 10)
			da := e.deps("replica-a")
			da.Lock = redislock.Options{Options: lock.Options{TTL: c.ttl, Wait: 2 * time.Second}}
			da.WorkDelay = 700 * time.Millisecond
			da.Holds = NewHoldLog(10)
			a := e.seller(t, inventory.Reentrant, da)
			b, holdsB := e.holdingReplica(t, inventory.Reentrant, "replica-b", 0)
			ctx := context.Background()

			waitA := sellAsync(a, inventory.Order{ProductID: id, Quantity: 1})
			waitClaimed(t, e) // the key alone is there before a's Lock returns
			if err := e.rdb.Del(ctx, redis.LockKey(id)).Err(); err != nil {
				t.Fatalf("DEL %s: %v", redis.LockKey(id), err)
			}
			saleB, errB := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 2})
			saleA, errA := waitA()

			if !errors.Is(errA, c.wantA) || (c.wantA == nil && errA != nil) {
				t.Errorf("replica a: Sell(%q, 1) after its lock was deleted = %+v, %v; want %v", id, saleA, errA, c.wantA)
			}
			if errA == nil && saleA.ID >= saleB.ID {
				t.Errorf("replica a's sale %d is not ordered before b's %d, though a claimed the row first", saleA.ID, saleB.ID)
			}
			if errB != nil {
				t.Fatalf("replica b: Sell(%q, 2) after a's lock was deleted = %v, want a sale", id, errB)
			}
			p := e.checkLedger(t, id)
			if p.Quantity != c.wantStock || p.Sales != c.wantRows {
				t.Errorf("after the fault: stock %d, %d ledger rows; want %d and %d", p.Quantity, p.Sales, c.wantStock, c.wantRows)
			}
			if saleB.Fence <= 0 {
				t.Errorf("replica b's sale has fence %d, want a positive fencing token", saleB.Fence)
			}
			checkLostLockHolds(t, da.Holds.For(id), holdsB.For(id), errA)
		})
	}
}

// checkLostLockHolds checks the holds of TestReentrantLockLost: a's one hold
// ended lock-lost when a failed, sold when it sold; b's hold, granted after
// a's key was deleted, has a higher fence, sold, and began while a still
// held (overlapping holders, measured) when a went on to sell.
func checkLostLockHolds(t *testing.T, a, b []Hold, errA error) {
	t.Helper()
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("holds: replica a %+v, replica b %+v; want one each", a, b)
	}
	wantA := HoldSold
	if errA != nil {
		wantA = HoldLockLost
	}
	if a[0].Outcome != wantA || a[0].Fence <= 0 || a[0].End.IsZero() {
		t.Errorf("replica a's hold %+v, want outcome %q with a fence (its Sell returned %v)", a[0], wantA, errA)
	}
	if b[0].Outcome != HoldSold || b[0].Fence <= a[0].Fence {
		t.Errorf("replica b's hold %+v, want outcome %q with a fence above a's %d", b[0], HoldSold, a[0].Fence)
	}
	if errA == nil && !b[0].Start.Before(a[0].End) {
		t.Errorf("replica b's hold started at %s, after a's ended at %s; want them overlapping (a kept working after its key was deleted)",
			b[0].Start.Format(time.RFC3339Nano), a[0].End.Format(time.RFC3339Nano))
	}
}

// TestStaleFenceRejected writes with a lower fencing token after a higher one
// committed: Postgres must refuse it and change nothing.
func TestStaleFenceRejected(t *testing.T) {
	e := newEnv(t)
	const id = "fenced"
	e.restock(t, id, 10)
	ctx := context.Background()
	steps := []struct {
		fence int64
		want  error
	}{
		{5, nil},
		{4, inventory.ErrLockBreach},
		{5, inventory.ErrLockBreach}, // equal is refused too: each hold writes once (see TestReentrantFenceCollisionAfterRedisLoss)
		{1, inventory.ErrLockBreach},
		{6, nil},
		{5, inventory.ErrLockBreach},
	}
	sold := int64(0)
	for _, s := range steps {
		_, err := e.store.SellFenced(ctx, inventory.Order{ProductID: id, Quantity: 1}, inventory.Reentrant, "test", lock.Fence{Backend: redislock.Backend, Token: s.fence}, 0)
		if !errors.Is(err, s.want) || (s.want == nil && err != nil) || (err != nil && !errors.Is(err, inventory.ErrLockLost)) {
			t.Errorf("SellFenced(%q, 1, fence %d) = %v, want %v", id, s.fence, err, s.want)
		}
		if err == nil {
			sold++
		}
	}
	p := e.checkLedger(t, id)
	if p.Quantity != 10-sold || p.Sales != sold {
		t.Errorf("stock %d, %d ledger rows; want %d and %d", p.Quantity, p.Sales, 10-sold, sold)
	}
	if f, err := e.store.Fence(ctx, redislock.Backend, id); err != nil || f != 6 {
		t.Errorf("fence(%q) = %d, %v; want 6, nil", id, f, err)
	}
}

// TestReentrantFenceCollisionAfterRedisLoss: Redis loses every key while
// replica A is inside its critical section, before A's watchdog can notice.
// Replica B's next token is minted from Postgres' highest committed fence, so
// it equals A's. A claimed the row first; B waits for A's commit and then
// Postgres refuses B's equal token: one of the two sells, never both.
func TestReentrantFenceCollisionAfterRedisLoss(t *testing.T) {
	e := newEnv(t)
	const id = "collide"
	e.restock(t, id, 10)
	ctx := context.Background()
	// A's TTL is long enough that no renewal falls inside the test, however
	// slow the machine: at 5s (a renewal due after ~1.7s) a loaded machine
	// stretched A's 800ms of work past it, the renewal found the key
	// flushed and A lost its lease, so B's claim went first (1 run in 30).
	long := testLock
	long.TTL = time.Minute
	a := e.replicaWith(t, inventory.Reentrant, "replica-a", long, 800*time.Millisecond)
	b := e.replica(t, inventory.Reentrant, "replica-b", 0)
	if _, err := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil {
		t.Fatalf("first sale: %v", err)
	}
	aDone := make(chan error, 1)
	var saleA inventory.Sale
	go func() {
		var err error
		saleA, err = a.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		aDone <- err
	}()
	waitClaimed(t, e)
	if err := e.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, errB := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
	errA := <-aDone
	if errA != nil {
		t.Errorf("A's sale, which claimed the row before B = %v, want it sold", errA)
	}
	if !errors.Is(errB, inventory.ErrLockBreach) || !errors.Is(errB, inventory.ErrLockLost) {
		t.Errorf("B's sale with the token A holds (fence %d) = %v, want ErrLockBreach with ErrLockLost", saleA.Fence, errB)
	}
	if p := e.checkLedger(t, id); p.Quantity != 8 || p.Sales != 2 {
		t.Errorf("stock %d with %d ledger rows, want 8 and 2 (the first sale and A's)", p.Quantity, p.Sales)
	}
}

// TestReentrantFenceSurvivesRedisLoss: after Redis loses every key, the next
// fencing token still starts above the highest one Postgres has seen.
func TestReentrantFenceSurvivesRedisLoss(t *testing.T) {
	e := newEnv(t)
	const id = "amnesia"
	e.restock(t, id, 10)
	s := e.seller(t, inventory.Reentrant, e.deps("replica-a"))
	ctx := context.Background()
	var last int64
	for i := range 3 {
		sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		if err != nil {
			t.Fatalf("sale %d: Sell(%q, 1) = %v", i+1, id, err)
		}
		if sale.Fence <= last {
			t.Errorf("sale %d (Redis flushed before it: %v): fence %d, want more than %d", i+1, i > 0, sale.Fence, last)
		}
		last = sale.Fence
		if err := e.rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
	}
}

// TestReentrantOwnerFromContext: a Sell whose context carries the owner
// that already holds the product's lock re-enters it; another owner waits
// and times out.
func TestReentrantOwnerFromContext(t *testing.T) {
	e := newEnv(t)
	const id = "nested"
	e.restock(t, id, 10)
	d := e.deps("replica-a")
	// About 25 attempts' worth of budget, so that even on a loaded machine
	// several attempts lose before it runs out.
	d.Lock.Wait = time.Second
	s, err := newReentrant(d.build(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := lock.WithOwner(context.Background(), "request-1")
	// Owners are scoped to one redislock.Reentrant, so hold the seller's own.
	outer, err := s.lk.Lock(ctx, redis.LockKey(id))
	if err != nil {
		t.Fatalf("Lock(%s) as request-1: %v", redis.LockKey(id), err)
	}
	if _, err := s.Sell(outer.Context(), inventory.Order{ProductID: id, Quantity: 1}); err != nil {
		t.Errorf("Sell(%q, 1) as request-1, which holds the lock = %v, want a re-entrant sale", id, err)
	}
	other := lock.WithOwner(context.Background(), "request-2")
	if _, err := s.Sell(other, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrLockTimeout) {
		t.Errorf("Sell(%q, 1) as request-2 while request-1 holds the lock = %v, want ErrLockTimeout", id, err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatalf("Release as request-1: %v (the nested Sell must have released only its own entry)", err)
	}
	if _, err := s.Sell(other, inventory.Order{ProductID: id, Quantity: 1}); err != nil {
		t.Errorf("Sell(%q, 1) as request-2 after request-1 released = %v, want a sale", id, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 8 {
		t.Errorf("stock %d, want 8", p.Quantity)
	}
}

// TestLuaGivesBack makes the Postgres half of a lua sale fail for sure, once
// before COMMIT and once at COMMIT (a deferred trigger): the reserved units
// must go back to the Redis counter, and nothing be sold.
func TestLuaGivesBack(t *testing.T) {
	e := newEnv(t)
	const id = "giveback"
	e.restock(t, id, 10)
	s := e.seller(t, inventory.Lua, e.deps("replica-a"))
	ctx := context.Background()
	mustExec(t, e, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by test'; END $$`)
	cases := []struct {
		name, trigger string
	}{
		{"fails before commit", `CREATE TRIGGER refuse BEFORE INSERT ON sales FOR EACH ROW EXECUTE FUNCTION refuse()`},
		{"fails at commit", `CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON sales DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()`},
	}
	for _, c := range cases {
		mustExec(t, e, c.trigger)
		_, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 3})
		if err == nil || errors.Is(err, inventory.ErrOutcomeUnknown) {
			t.Errorf("%s: Sell(%q, 3) = %v, want a definite failure", c.name, id, err)
		}
		if n, err := counterLeft(e, id); err != nil || n != 10 {
			t.Errorf("%s: counter %s = %d, %v; want 10 (units given back)", c.name, redis.CounterKey(id), n, err)
		}
		mustExec(t, e, `DROP TRIGGER refuse ON sales`)
	}
	if sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 3}); err != nil || sale.Remaining != 7 {
		t.Errorf("Sell(%q, 3) once Postgres accepts = %+v, %v; want 7 remaining", id, sale, err)
	}
	if n, _ := counterLeft(e, id); n != 7 {
		t.Errorf("counter %s = %d, want 7", redis.CounterKey(id), n)
	}
	p := e.checkLedger(t, id)
	if p.Quantity != 7 || p.Sales != 1 {
		t.Errorf("stock %d, %d ledger rows; want 7 and 1", p.Quantity, p.Sales)
	}
}

// counterLeft is the units left in the lua strategy's Redis counter for id.
func counterLeft(e *env, id string) (int64, error) {
	return e.rdb.HGet(context.Background(), redis.CounterKey(id), "n").Int64()
}

// waitClaimed waits until a sale's transaction has claimed a stock row with
// its fencing token and sits in it (doing the simulated work): the holder
// is past its Lock call, inside the critical section. A lock holder's claim
// is its transaction's first row lock, so testenv.SalesAtWork tells it
// (its claim run, not merely prepared: see there).
func waitClaimed(t *testing.T, e *env) {
	t.Helper()
	waitFor(t, "a lock holder to claim the stock row", 5*time.Second, func() bool {
		return testenv.SalesAtWork(t, e.pgURL) > 0
	})
}

func mustExec(t *testing.T, e *env, sql string) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("Exec(%q): %v", sql, err)
	}
}

// TestLuaReseeds deletes the counter between sales: the next sale reloads it
// from Postgres.
func TestLuaReseeds(t *testing.T) {
	e := newEnv(t)
	const id = "reseed"
	e.restock(t, id, 10)
	s := e.seller(t, inventory.Lua, e.deps("replica-a"))
	ctx := context.Background()
	for i, want := range []int64{9, 8, 7} {
		if i > 0 {
			if err := e.rdb.Del(ctx, redis.CounterKey(id)).Err(); err != nil {
				t.Fatalf("DEL %s: %v", redis.CounterKey(id), err)
			}
		}
		sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
		if err != nil || sale.Remaining != want {
			t.Errorf("sale %d: Sell(%q, 1) = %d remaining, %v; want %d", i+1, id, sale.Remaining, err, want)
		}
		if n, err := counterLeft(e, id); err != nil || n != want {
			t.Errorf("sale %d: counter %s = %d, %v; want %d", i+1, redis.CounterKey(id), n, err, want)
		}
	}
	// Restock resets the counter too.
	e.restock(t, id, 50)
	if sale, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); err != nil || sale.Remaining != 49 {
		t.Errorf("after Restock(%q, 50): Sell = %d remaining, %v; want 49", id, sale.Remaining, err)
	}
}

// TestLuaCounterLostMidFlight: Redis loses the counter while a sale has
// reserved the last unit but not yet committed; the reload from Postgres
// counts that unit again, so both sales get past Redis, and Postgres's
// guarded write lets exactly one of them have it. The other is sold out.
func TestLuaCounterLostMidFlight(t *testing.T) {
	e := newEnv(t)
	const id = "amnesiac"
	e.restock(t, id, 1)
	da := e.deps("replica-a")
	da.WorkDelay = 500 * time.Millisecond
	a := e.seller(t, inventory.Lua, da)
	b := e.replica(t, inventory.Lua, "replica-b", 0)
	ctx := context.Background()

	waitA := sellAsync(a, inventory.Order{ProductID: id, Quantity: 1})
	waitFor(t, "replica a to reserve the last unit", 5*time.Second, func() bool {
		n, err := counterLeft(e, id)
		return err == nil && n == 0
	})
	if err := e.rdb.Del(ctx, redis.CounterKey(id)).Err(); err != nil {
		t.Fatalf("DEL %s: %v", redis.CounterKey(id), err)
	}
	_, errB := b.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1})
	_, errA := waitA()
	if (errA == nil) == (errB == nil) || !errors.Is(errors.Join(errA, errB), inventory.ErrSoldOut) {
		t.Errorf("Sell(%q, 1) on a and b = %v, %v; want one sale and one ErrSoldOut", id, errA, errB)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sales != 1 {
		t.Errorf("stock %d, %d ledger rows after the counter was lost mid-flight; want 0 and 1", p.Quantity, p.Sales)
	}
}

// TestConcurrentIdempotencyKey sends one order with one key from many
// goroutines on two replicas at once: exactly one sale, every caller gets it.
func TestConcurrentIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	for _, name := range inventory.Names() {
		t.Run(name, func(t *testing.T) {
			id := "dup-" + name
			e.restock(t, id, 10)
			replicas := []inventory.Seller{e.replica(t, name, "replica-a", 0), e.replica(t, name, "replica-b", 0)}
			o := inventory.Order{ProductID: id, Quantity: 2, IdempotencyKey: "same-" + name}
			sales, errs := sellCopies(replicas, o, 12)
			fresh := 0
			for i := range sales {
				if errs[i] != nil {
					t.Errorf("Sell(%s) #%d = %v, want the one sale", formatOrder(o), i, errs[i])
					continue
				}
				if sales[i].ID != sales[0].ID {
					t.Errorf("Sell(%s) #%d = sale %d, #0 = sale %d; want the same", formatOrder(o), i, sales[i].ID, sales[0].ID)
				}
				if !sales[i].Replayed {
					fresh++
				}
			}
			if fresh != 1 {
				t.Errorf("%d callers got a fresh sale, want exactly 1 (the rest replays)", fresh)
			}
			p := e.checkLedger(t, id)
			if p.Quantity != 8 || p.Sales != 1 {
				t.Errorf("stock %d, %d ledger rows; want 8 and 1", p.Quantity, p.Sales)
			}
			if name == inventory.Lua {
				if n, err := counterLeft(e, id); err != nil || n != 8 {
					t.Errorf("counter %s = %d, %v; want 8 (the losers gave their units back)", redis.CounterKey(id), n, err)
				}
			}
		})
	}
}

// TestUnavailable points the strategies at servers that do not answer: every
// one must fail with ErrUnavailable, which the API turns into 503.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	e := newOwnEnv(t)
	const id = "down"
	e.restock(t, id, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Redis down: a port nobody listens on. Not a stopped server's port:
	// that one is in FreePort's range, where another test binary's server
	// can take it meanwhile (the lock then waited on whatever answered
	// there, and timed out instead of failing as unavailable); a port the
	// kernel handed to a listener of its own, now closed, is not.
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	redisAddr := rln.Addr().String()
	rln.Close()
	deadRedis := goredis.NewClient(&goredis.Options{Addr: redisAddr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = deadRedis.Close() })
	for _, name := range []string{inventory.RedisLock, inventory.Reentrant, inventory.Lua} {
		d := e.deps("replica-a")
		d.Redis = deadRedis
		d.Lock.Wait = time.Second
		s := e.seller(t, name, d)
		if _, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrUnavailable) {
			t.Errorf("%s with Redis down: Sell(%q, 1) = %v, want ErrUnavailable", name, id, err)
		}
	}

	// Postgres down: a pool on a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	deadPool := newPool(t, fmt.Sprintf("postgres://postgres@%s/inventory?sslmode=disable&connect_timeout=1", addr))
	dead := postgres.NewStore(deadPool, postgres.Limits{})
	for _, name := range inventory.Names() {
		d := e.deps("replica-a")
		d.Store = dead
		s := e.seller(t, name, d)
		if _, err := s.Sell(ctx, inventory.Order{ProductID: id, Quantity: 1}); !errors.Is(err, inventory.ErrUnavailable) {
			t.Errorf("%s with Postgres down: Sell(%q, 1) = %v, want ErrUnavailable", name, id, err)
		}
	}
	if err := dead.Ping(ctx); !errors.Is(err, inventory.ErrUnavailable) {
		t.Errorf("Ping with Postgres down = %v, want ErrUnavailable", err)
	}
	if _, err := dead.Product(ctx, id); !errors.Is(err, inventory.ErrUnavailable) {
		t.Errorf("Product(%q) with Postgres down = %v, want ErrUnavailable", id, err)
	}
	if p := e.checkLedger(t, id); p.Sales != 0 {
		t.Errorf("%d sales recorded while a backend was down, want 0", p.Sales)
	}

	// A restock answers what Postgres did: with Redis down it still
	// restocks (nothing depends on Redis's copy), and says the reset of
	// Redis failed. Before, it answered 503 although the round had changed,
	// and a retry started yet another round.
	before := e.product(t, id)
	done, err := Restocker{Store: e.store, Redis: deadRedis}.Restock(ctx, inventory.RestockOrder{ProductID: id, Quantity: 5})
	if err != nil || done.Round != before.Round+1 || done.Quantity != 5 || !errors.Is(done.ResetErr, inventory.ErrUnavailable) {
		t.Errorf("Restock(%q, 5) with Redis down = %+v, %v; want round %d with 5 units and a ResetErr wrapping ErrUnavailable",
			id, done, err, before.Round+1)
	}
	if p := e.product(t, id); p.Round != before.Round+1 || p.Quantity != 5 {
		t.Errorf("after the restock with Redis down: round %d, quantity %d; want %d and 5", p.Round, p.Quantity, before.Round+1)
	}
}

// TestOptimisticContention keeps changing the version under an optimistic
// sale whose every attempt takes far longer than the gap between changes:
// each compare-and-set loses (OnConflict counts them) until the Lock.Wait
// budget ends with ErrContention, having sold nothing. The other writer
// bumps the version straight in Postgres every few milliseconds, and each
// attempt works 500 ms: an attempt sells only if the writer makes no
// change for all of that. (With a whole sale for each change, and 150 ms
// of work, a loaded machine once starved the writer for an attempt, which
// then sold.)
func TestOptimisticContention(t *testing.T) {
	e := newEnv(t)
	const id = "contended"
	e.restock(t, id, 10)
	var conflicts atomicInt
	d := e.deps("replica-a")
	d.WorkDelay = 500 * time.Millisecond
	// A few attempts' worth of budget, so that several lose before it
	// runs out.
	d.Lock.Wait = 2 * time.Second
	d.OnConflict = conflicts.add
	s := e.seller(t, inventory.Optimistic, d)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = e.pool.Exec(ctx, `UPDATE stock SET version = version + 1 WHERE product_id = $1`, id)
			time.Sleep(5 * time.Millisecond) // a change every few ms, not a busy loop
		}
	})
	waitFor(t, "the other writer to get going", 10*time.Second, func() bool { return e.product(t, id).Version >= 3 })
	began := time.Now()
	_, err := s.Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: "contended-1"})
	t.Logf("Sell took %v, %d conflicts: %v", time.Since(began), conflicts.get(), err)
	stop()
	wg.Wait()
	if !errors.Is(err, inventory.ErrContention) {
		t.Errorf("Sell(%q, 1) while the version changes every few ms = %v, want ErrContention", id, err)
	}
	if n := conflicts.get(); n < 2 {
		t.Errorf("OnConflict called %d times, want at least 2", n)
	}
	if sale, found, err := e.store.Replay(context.Background(), inventory.Order{ProductID: id, Quantity: 1, IdempotencyKey: "contended-1"}); found || err != nil {
		t.Errorf("ledger has sale %+v (err %v) for the contended order, want none", sale, err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 10 {
		t.Errorf("stock %d after the contended sale, want the 10 restocked", p.Quantity)
	}
}

// atomicInt counts OnConflict calls.
type atomicInt struct {
	mu sync.Mutex
	n  int
}

func (a *atomicInt) add() { a.mu.Lock(); a.n++; a.mu.Unlock() }
func (a *atomicInt) get() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// TestRedisLockOverrunRollsBack: a critical section that outlives the plain
// lock's TTL is cancelled at the lease's deadline and rolled back, instead of
// committing while another replica may hold the lock.
func TestRedisLockOverrunRollsBack(t *testing.T) {
	e := newEnv(t)
	const id = "overrun"
	e.restock(t, id, 10)
	d := e.deps("replica-a")
	d.Lock.TTL = 200 * time.Millisecond
	d.WorkDelay = 400 * time.Millisecond
	_, err := e.seller(t, inventory.RedisLock, d).Sell(context.Background(), inventory.Order{ProductID: id, Quantity: 1})
	if !errors.Is(err, inventory.ErrLockLost) {
		t.Errorf("Sell with 400ms of work under a 200ms lock = %v, want ErrLockLost", err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 10 || p.Sales != 0 {
		t.Errorf("stock %d with %d ledger rows after the overrun, want 10 and 0", p.Quantity, p.Sales)
	}
}

// TestFencedSaleWaitsForAStaleHoldersCommit: a stale holder (fence 1) has
// decremented but not committed (say it was paused right before COMMIT,
// which runs detached from its cancelled context) when the new holder
// (fence 2) sells the same last unit. The new holder must see the stale sale
// once it commits, and find the product sold out, not sell the unit twice.
func TestFencedSaleWaitsForAStaleHoldersCommit(t *testing.T) {
	e := newEnv(t)
	const id = "paused-commit"
	e.restock(t, id, 1)
	ctx := context.Background()
	one := inventory.Order{ProductID: id, Quantity: 1}

	wrote, resume, staleDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := e.store.Record(ctx, one, inventory.Reentrant, "stale", func(ctx context.Context, tx *postgres.SaleTx) (postgres.Decrement, error) {
			// A fenced claim and decrement held before their commit, as a
			// handoff batch's transaction can be (a sale's is one statement).
			if _, _, err := tx.ClaimFence(ctx, lock.Fence{Backend: redislock.Backend, Token: 1}); err != nil {
				close(wrote)
				return postgres.Decrement{}, err
			}
			d, err := tx.DecrementIfEnough(ctx, 1)
			close(wrote)
			<-resume // paused between its UPDATE and its COMMIT
			return d, err
		})
		staleDone <- err
	}()
	<-wrote
	newDone := make(chan error, 1)
	go func() {
		_, err := e.store.SellFenced(ctx, one, inventory.Reentrant, "new", lock.Fence{Backend: redislock.Backend, Token: 2}, 0)
		newDone <- err
	}()
	waitFor(t, "the new holder's claim to wait for the stale holder's row lock", 5*time.Second, func() bool {
		var n int
		err := e.pool.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'CALL sell(%'`).Scan(&n)
		return err == nil && n > 0
	})
	close(resume)
	if err := <-staleDone; err != nil {
		t.Errorf("the stale holder's sale, written before the new holder acted = %v, want it committed", err)
	}
	if err := <-newDone; !errors.Is(err, inventory.ErrSoldOut) {
		t.Errorf("the new holder's sale of the unit the stale one took = %v, want ErrSoldOut", err)
	}
	if p := e.checkLedger(t, id); p.Quantity != 0 || p.Sales != 1 {
		t.Errorf("stock %d with %d ledger rows, want 0 and 1 (no oversell)", p.Quantity, p.Sales)
	}
}
