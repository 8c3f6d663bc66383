package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"inventory/internal/fleet"
	"inventory/internal/lock"
	"inventory/internal/lock/backend"
	"inventory/internal/lock/etcdlock"
	"inventory/internal/lock/pglock"
	"inventory/internal/lock/redislock/redisbreak"
	"inventory/internal/lock/zklock"
	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// lockFunc is one "replica": a Locker of its own taking name.
type lockFunc func(ctx context.Context, name string) (lock.Lease, error)

// holders is how many contend for the product's lock: the three the fault
// strikes and one more, who must keep the lock.
const holders = deletions + 1

// testDeadline bounds each wait of these tests for what they wait on.
const testDeadline = 30 * time.Second

func etcdLockers(t *testing.T) (*fleet.Fleet, []lockFunc) {
	eps := testenv.EtcdEndpoints(t)
	var lockers []lockFunc
	for range holders {
		l, err := etcdlock.Dial(context.Background(), eps, etcdlock.Options{Options: lock.Options{TTL: 10 * time.Second, Wait: testDeadline}})
		if err != nil {
			t.Fatalf("etcdlock.Dial(%v): %v", eps, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		lockers = append(lockers, func(ctx context.Context, name string) (lock.Lease, error) { return l.Lock(ctx, name) })
	}
	return &fleet.Fleet{LockServers: map[string]backend.Servers{etcdlock.Setting: running(eps[0])}}, lockers
}

func zkLockers(t *testing.T) (*fleet.Fleet, []lockFunc) {
	servers := testenv.ZooKeeperServers(t)
	var lockers []lockFunc
	for range holders {
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		l, err := zklock.New(ctx, servers, zklock.Options{Options: lock.Options{TTL: 10 * time.Second, Wait: testDeadline}})
		cancel()
		if err != nil {
			t.Fatalf("zklock.New(%v): %v", servers, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		lockers = append(lockers, func(ctx context.Context, name string) (lock.Lease, error) { return l.Lock(ctx, name) })
	}
	return &fleet.Fleet{LockServers: map[string]backend.Servers{zklock.Setting: running(servers[0])}}, lockers
}

// running is servers the tests run, as a fleet's lock backend's
// (fleet.Fleet.LockServers): its setting's value.
type running string

func (r running) Setting() string              { return string(r) }
func (running) Logs() map[string]func() string { return nil }
func (running) Stop() error                    { return nil }

func pgLockers(t *testing.T) (*fleet.Fleet, []lockFunc) {
	url := migratedDB(t)
	var lockers []lockFunc
	for range holders {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatalf("pgxpool.New: %v", err)
		}
		t.Cleanup(pool.Close)
		l := pglock.New(pool, pglock.Options{Options: lock.Options{TTL: time.Minute, Wait: testDeadline}})
		lockers = append(lockers, func(ctx context.Context, name string) (lock.Lease, error) { return l.Lock(ctx, name) })
	}
	return &fleet.Fleet{PostgresURL: url}, lockers
}

// migratedDB returns the URL of a fresh database with the service's schema.
func migratedDB(t *testing.T) string {
	url := testenv.PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	return url
}

// grant is one acquisition: which locker, and its lease; once lost, why
// (Lease.Err and the cause of Lease.Context, read before the release).
type grant struct {
	i          int
	lease      lock.Lease
	err, cause error
}

// contend has lockers[0] take the product's lock, then every other locker
// wait for it in a goroutine, each sending its grant on the channel
// returned. Each holder keeps its lease until done is closed (for pglock)
// or, when lost is not nil, until the lease is lost, which it reports
// there; then it releases.
func contend(t *testing.T, lockers []lockFunc, product string, lost chan<- grant, done <-chan struct{}) <-chan grant {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	granted := make(chan grant, len(lockers))
	hold := func(g grant) {
		granted <- g
		select {
		case <-g.lease.Context().Done():
			if lost != nil {
				g.err, g.cause = g.lease.Err(), context.Cause(g.lease.Context())
				lost <- g
			}
		case <-done:
		case <-ctx.Done():
		}
		if lost != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), testDeadline)
			_ = g.lease.Release(rctx)
			rcancel()
		}
	}
	first, err := lockers[0](ctx, lockName(product))
	if err != nil {
		t.Fatalf("Lock(%s) by locker 0 = %v", lockName(product), err)
	}
	wg.Go(func() { hold(grant{i: 0, lease: first}) })
	for i, lock := range lockers[1:] {
		wg.Go(func() {
			lease, err := lock(ctx, lockName(product))
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("Lock(%s) by locker %d = %v", lockName(product), i+1, err)
				}
				return
			}
			hold(grant{i: i + 1, lease: lease})
		})
	}
	return granted
}

// testSettle is the fault's Settle in these tests: the holders here keep
// their locks until they lose them, so an etcd or ZooKeeper holder can be
// given far longer than any scheduling delay of a loaded CI machine to see
// that it holds the lock before it is struck (10ms was not always enough).
const testSettle = 200 * time.Millisecond

// inject runs the fault on product in the background.
func inject(f *fleet.Fleet, product string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		errc <- (&LockExpiredEarly{Settle: testSettle}).Inject(ctx, Target{Fleet: f, Product: product})
	}()
	return errc
}

// next receives from ch or fails the test after testDeadline.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testDeadline):
		t.Fatalf("waited %v for %s", testDeadline, what)
		panic("unreachable")
	}
}

// TestLockExpiredEarlyDeletesHoldersKeys: in etcd and ZooKeeper, Inject
// deletes the lock of three holders in a row, each inside its critical
// section (holding its lease, not released); each loses its lease (its
// Context is cancelled, Err says its key or node was deleted), the next
// waiter takes over, and the fourth holder keeps the lock.
func TestLockExpiredEarlyDeletesHoldersKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(*testing.T) (*fleet.Fleet, []lockFunc)
		deleted error
	}{
		{"etcd", etcdLockers, etcdlock.ErrKeyDeleted},
		{"zookeeper", zkLockers, zklock.ErrNodeDeleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, lockers := tc.setup(t)
			product := fmt.Sprintf("expire-%s-%d", tc.name, time.Now().UnixNano())
			lost := make(chan grant, holders)
			granted := contend(t, lockers, product, lost, nil)
			// Grants are read by locker, not in channel order: under load a
			// holder can be struck (and its successor granted) before its
			// own goroutine has reported its grant.
			seen := map[int]grant{}
			waitGranted := func(i int, what string) grant {
				t.Helper()
				for {
					if g, ok := seen[i]; ok {
						return g
					}
					g := next(t, granted, what)
					seen[g.i] = g
				}
			}
			first := next(t, granted, "the first holder")
			seen[first.i] = first
			errc := inject(f, product)
			// Each loser learns of its loss on its own (a watch on its key
			// or node), so the losses may be reported out of order: compare
			// fences, not arrival.
			var lastFence int64
			struck := map[int]bool{}
			for n := range deletions {
				g := next(t, lost, fmt.Sprintf("holder %d of %d to lose its lease", n+1, deletions))
				waitGranted(g.i, fmt.Sprintf("the grant of locker %d, which lost its lease", g.i))
				if !errors.Is(g.err, tc.deleted) {
					t.Fatalf("holder %d: Lease.Err() = %v, want %v", n+1, g.err, tc.deleted)
				}
				if !errors.Is(g.cause, tc.deleted) {
					t.Fatalf("holder %d: context.Cause(Lease.Context()) = %v, want %v", n+1, g.cause, tc.deleted)
				}
				if struck[g.i] {
					t.Fatalf("locker %d lost its lease twice", g.i)
				}
				lastFence = max(lastFence, g.lease.Fence().Token)
				struck[g.i] = true
			}
			if err := next(t, errc, "Inject to return"); err != nil {
				t.Fatalf("Inject = %v, want nil", err)
			}
			for i := range holders {
				if struck[i] {
					continue
				}
				// The one locker not struck holds the lock now, after the
				// last struck holder.
				holder := waitGranted(i, fmt.Sprintf("the grant of locker %d, the last holder", i))
				if holder.lease.Fence().Token <= lastFence {
					t.Fatalf("the last holder (locker %d) has fence %d, want above every struck holder's (up to %d)", i, holder.lease.Fence().Token, lastFence)
				}
				if err := holder.lease.Err(); err != nil {
					t.Fatalf("the fourth holder (locker %d) after Inject returned: Lease.Err() = %v, want nil", i, err)
				}
			}
		})
	}
}

// TestLockExpiredEarlyExpiresPgLockRow: Inject makes the locks row of
// three holders in a row look expired while each still holds its lease; a
// waiter takes the lock over each time, with a higher fence, and each
// struck holder learns at Release that it no longer held the lock. (A
// pglock lease never reads its row back, so it cannot notice sooner: see
// LockExpiredEarly.) The fourth holder keeps the lock.
func TestLockExpiredEarlyExpiresPgLockRow(t *testing.T) {
	f, lockers := pgLockers(t)
	product := fmt.Sprintf("expire-pglock-%d", time.Now().UnixNano())
	done := make(chan struct{})
	defer close(done)
	granted := contend(t, lockers, product, nil, done)
	// Grants are ordered by fence, not by channel order: under load a
	// holder can be struck (and its successor granted) before its own
	// goroutine has sent its grant.
	held := []grant{next(t, granted, "the first holder")}
	errc := inject(f, product)
	for n := range deletions {
		held = append(held, next(t, granted, fmt.Sprintf("a waiter to take over, %d of %d", n+1, deletions)))
	}
	slices.SortFunc(held, func(a, b grant) int { return cmp.Compare(a.lease.Fence().Token, b.lease.Fence().Token) })
	for n := 1; n < len(held); n++ {
		if prev, g := held[n-1], held[n]; g.lease.Fence().Token <= prev.lease.Fence().Token {
			t.Fatalf("locker %d took over with fence %d, want above holder %d's (locker %d) %d", g.i, g.lease.Fence().Token, n, prev.i, prev.lease.Fence().Token)
		}
	}
	if err := next(t, errc, "Inject to return"); err != nil {
		t.Fatalf("Inject = %v, want nil", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	for n, g := range held {
		err := g.lease.Release(ctx)
		if n < deletions && !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("holder %d (locker %d), its row expired under it: Release = %v, want ErrNotHeld", n+1, g.i, err)
		}
		if n == deletions && err != nil {
			t.Errorf("the fourth holder (locker %d): Release = %v, want nil", g.i, err)
		}
	}
}

// TestLockExpiredEarlyNotStruck: with no lock of the product in Redis,
// etcd, ZooKeeper or the locks table, Inject reports ErrNotStruck (a miss,
// tried again), not ErrNotApplicable (which would skip the cell).
func TestLockExpiredEarlyNotStruck(t *testing.T) {
	f := &fleet.Fleet{
		RedisURL:    testenv.RedisURL(t),
		PostgresURL: migratedDB(t),
		LockServers: map[string]backend.Servers{
			etcdlock.Setting: running(testenv.EtcdEndpoints(t)[0]),
			zklock.Setting:   running(testenv.ZooKeeperServers(t)[0]),
		},
	}
	err := next(t, inject(f, "expire-nobody"), "Inject to return")
	if !errors.Is(err, ErrNotStruck) || errors.Is(err, ErrNotApplicable) {
		t.Fatalf("Inject on a product nobody locks = %v, want ErrNotStruck (and not ErrNotApplicable)", err)
	}
	for _, place := range []string{"Redis", "etcd", "ZooKeeper", "locks table"} {
		if !strings.Contains(err.Error(), place) {
			t.Errorf("Inject = %q, want it to name %s", err, place)
		}
	}
}

// TestLockExpiredEarlyFindsSetNXsKey: setnx keeps its naive lock under
// "setnx:{id}", not "lock:{id}"; lock-expired-early must find it there, or
// it never strikes setnx (which the matrix showed as DID NOT STRIKE).
func TestLockExpiredEarlyFindsSetNXsKey(t *testing.T) {
	ctx := context.Background()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	product := fmt.Sprintf("setnx-key-%d", time.Now().UnixNano())
	if err := rdb.SetNX(ctx, "setnx:{"+product+"}", 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	key, val, err := redisbreak.LockKey(ctx, rdb, lockName(product))
	if key != "setnx:{"+product+"}" || val != "1" || err != nil {
		t.Errorf("redisbreak.LockKey(%s) = %q, %q, %v; want setnx:{%s}, 1", lockName(product), key, val, err, product)
	}
}
