package productcache

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
	"inventory/internal/testenv"
)

func TestParseModeNamesTheModes(t *testing.T) {
	for _, name := range []string{"lock", "nolock", "off"} {
		if m, err := ParseMode(name); err != nil || string(m) != name {
			t.Errorf("ParseMode(%q) = %q, %v, want %q, nil", name, m, err, name)
		}
	}
	for _, name := range []string{"", "LOCK", "on", "no-lock"} {
		if _, err := ParseMode(name); err == nil || !strings.Contains(err.Error(), "want lock, nolock or off") {
			t.Errorf("ParseMode(%q) = %v, want an error naming the modes", name, err)
		}
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	load := func(context.Context, string) (inventory.Product, error) { return inventory.Product{}, nil }
	locker := redislock.NewMutex(nil, redislock.Options{})
	rdb := client(t, "redis://127.0.0.1:1/0") // never dialled
	for _, tc := range []struct {
		name string
		load Loader
		opts Options
		want string
	}{
		{"no loader", nil, Options{Locker: locker}, "Loader is required"},
		{"lock without a locker", load, Options{}, "needs a Locker"},
		{"unknown mode", load, Options{Mode: "on", Locker: locker}, "want lock, nolock or off"},
		{"TTL too short", load, Options{TTL: 9 * time.Millisecond, Locker: locker}, "between 10ms and 10s, got 9ms"},
		{"TTL too long", load, Options{TTL: 11 * time.Second, Locker: locker}, "between 10ms and 10s, got 11s"},
		{"negative wait", load, Options{Wait: -time.Second, Locker: locker}, "must not be negative"},
	} {
		if _, err := New(rdb, tc.load, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(nil, load, Options{Mode: Off}); err != nil {
		t.Errorf("New(nil Redis, mode off) = %v, want nil: off needs no Redis", err)
	}
}

func TestAReadIsSharedThroughRedis(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	one, two := b.replica(t, reads, Options{}), b.replica(t, reads, Options{})
	ctx := context.Background()
	r, err := one.Get(ctx, "p")
	if err != nil || r.Source != SourcePostgres || r.Product.Quantity != 5 {
		t.Fatalf("first Get = %+v, %v, want 5 units from postgres", r, err)
	}
	r, err = two.Get(ctx, "p")
	if err != nil || r.Source != SourceCache || r.Product != (inventory.Product{ID: "p", Name: "test", Quantity: 5, Initial: 5, Round: 1}) {
		t.Fatalf("the other replica's Get = %+v, %v, want the whole product from the cache", r, err)
	}
	if age := r.Age(); age >= time.Second {
		t.Errorf("Age() = %v, want under the TTL (1s)", age)
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("Postgres read %d times, want 1", n)
	}
}

// TestALockTakenAfterAnotherRefreshReadsTheEntry: a reader that missed the
// entry, then got the refresh lock only after another replica had
// refreshed the entry and let the lock go, answers that entry instead of
// reading Postgres again (CI, under load: one expiry, two Postgres reads,
// neither after a wait).
func TestALockTakenAfterAnotherRefreshReadsTheEntry(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	other := b.replica(t, reads, Options{})
	rdb := client(t, b.redis)
	m := redislock.NewMutex(rdb, redislock.Options{Options: lock.Options{TTL: time.Second}})
	t.Cleanup(m.Close)
	// The other replica's whole refresh lands between this reader's miss
	// and its TryLock.
	late := lateLocker{Locker: m, before: func(ctx context.Context) {
		if _, err := other.Get(ctx, "p"); err != nil {
			t.Errorf("the other replica's read: %v", err)
		}
	}}
	r, err := b.replica(t, reads, Options{Locker: late}).Get(context.Background(), "p")
	if err != nil || r.Product.Quantity != 5 {
		t.Fatalf("Get = %+v, %v; want 5 units", r, err)
	}
	if r.Source != SourceCache {
		t.Errorf("Get answered from %s, want %s (the entry the other replica had just written)", r.Source, SourceCache)
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("Postgres read %d times, want 1 (the other replica's refresh)", n)
	}
}

// lateLocker runs before ahead of every TryLock.
type lateLocker struct {
	lock.Locker
	before func(context.Context)
}

func (l lateLocker) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	l.before(ctx)
	return l.Locker.TryLock(ctx, key)
}

// age is how old id's entry is, by its remaining life.
func age(t *testing.T, r *replica, id string, ttl time.Duration) time.Duration {
	t.Helper()
	pttl, err := r.rdb.PTTL(context.Background(), entryKey(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl < 0 {
		return ttl
	}
	return ttl - pttl
}

func TestTheFirstReaderPastHalfTheTTLRefreshes(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	const ttl = 400 * time.Millisecond
	c := b.replica(t, reads, Options{TTL: ttl})
	ctx := context.Background()
	if _, err := c.Get(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `UPDATE stock SET quantity = 4, version = version + 1 WHERE product_id = 'p'`)
	if r, err := c.Get(ctx, "p"); err != nil || r.Source != SourceCache || r.Product.Quantity != 5 {
		t.Fatalf("Get of a young entry = %+v, %v, want the cached 5", r, err)
	}
	testenv.WaitFor(t, "the entry to be half the TTL old", 5*time.Second, func() bool { return age(t, c, "p", ttl) >= ttl/2 })
	r, err := c.Get(ctx, "p")
	if err != nil || r.Source != SourcePostgres || r.Product.Quantity != 4 {
		t.Fatalf("Get past half the TTL = %+v, %v, want 4 from postgres (a refresh)", r, err)
	}
	if a := age(t, c, "p", ttl); a >= ttl/2 {
		t.Errorf("the refreshed entry is %v old, want young", a)
	}
	if n := reads.n.Load(); n != 2 {
		t.Errorf("Postgres read %d times, want 2", n)
	}
}

// holdRefresh takes id's refresh lock as another replica would, until the
// test ends.
func holdRefresh(t *testing.T, r *replica, id string) {
	t.Helper()
	m := redislock.NewMutex(r.rdb, redislock.Options{Options: lock.Options{TTL: time.Minute}})
	t.Cleanup(m.Close)
	lease, err := m.TryLock(context.Background(), refreshKey(id))
	if err != nil {
		t.Fatalf("take the refresh lock: %v", err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
}

func TestWhileAnotherRefreshesTheEntryIsServedStale(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	const ttl = 400 * time.Millisecond
	c := b.replica(t, reads, Options{TTL: ttl})
	ctx := context.Background()
	if _, err := c.Get(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	holdRefresh(t, c, "p")
	testenv.WaitFor(t, "the entry to be half the TTL old", 5*time.Second, func() bool { return age(t, c, "p", ttl) >= ttl/2 })
	r, err := c.Get(ctx, "p")
	if err != nil || r.Source != SourceStale || r.Product.Quantity != 5 {
		t.Fatalf("Get of a due entry whose refresh lock is held = %+v, %v, want the entry, stale", r, err)
	}
	if r.Age() < ttl/2 || r.Age() >= ttl {
		t.Errorf("Age() = %v, want between half the TTL and the TTL (%v)", r.Age(), ttl)
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("Postgres read %d times, want 1 (no second refresh)", n)
	}
}

func TestAMissWaitsForTheRefresher(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	const ttl = 2 * time.Second
	c := b.replica(t, reads, Options{TTL: ttl, Wait: time.Minute})
	holdRefresh(t, c, "p")
	ctx := context.Background()
	type answer struct {
		r   Read
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := c.Get(ctx, "p")
		got <- answer{r, err}
	}()
	testenv.WaitFor(t, "the reader to find the refresh lock held", 5*time.Second, func() bool {
		c.obs.mu.Lock()
		defer c.obs.mu.Unlock()
		return c.obs.locks[LockHeld] == 1
	})
	// The lock holder's refresh lands.
	p, err := b.store.Product(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := store(ctx, c.rdb, "p", p, false, time.Now(), ttl); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.r.Source != SourceCache || a.r.Product.Quantity != 5 {
		t.Fatalf("Get = %+v, %v, want the refresher's entry", a.r, a.err)
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("the waiting replica read Postgres %d times, want 0", n)
	}
	if w := c.obs.waited(); len(w) != 1 || !w[0] {
		t.Errorf("waits = %v, want one, filled", w)
	}
}

func TestAMissWhoseRefresherNeverWritesReadsPostgresAfterTheWait(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	c := b.replica(t, reads, Options{TTL: time.Second, Wait: 20 * time.Millisecond})
	holdRefresh(t, c, "p")
	r, err := c.Get(context.Background(), "p")
	if err != nil || r.Source != SourcePostgres || r.Product.Quantity != 5 {
		t.Fatalf("Get = %+v, %v, want 5 from postgres", r, err)
	}
	if n, fb, w := reads.n.Load(), c.obs.fellBack(FallbackWait), c.obs.waited(); n != 1 || fb != 1 || len(w) != 1 || w[0] {
		t.Errorf("Postgres reads %d, wait fallbacks %d, waits %v; want 1, 1, [false]", n, fb, w)
	}
	// Its read is shared: the next reader finds it.
	if r, err := c.Get(context.Background(), "p"); err != nil || r.Source != SourceCache {
		t.Errorf("the next Get = %+v, %v, want the fallback's entry", r, err)
	}
}

// TestAnExpiryUnderACrowd is the stampede (cache breakdown): an entry
// expires in Redis while 500 readers on five replicas wait to read it, and
// all come at once. Without the lock each reader that misses reads
// Postgres. With it, each replica makes one lookup for all its readers,
// and of those lookups one takes the refresh lock and reads Postgres while
// the others wait for its entry: one read in the fleet, plus one for each
// replica whose wait ran out; at most two per replica.
func TestAnExpiryUnderACrowd(t *testing.T) {
	const replicas, readers = 5, 500
	for _, mode := range []Mode{NoLock, Lock} {
		t.Run(string(mode), func(t *testing.T) {
			b := newBackends(t)
			b.product(t, "hot", 100)
			reads := &loads{load: b.store.Product}
			if mode == NoLock {
				// Postgres as slow as a crowd makes it: without it, on a
				// busy machine the first reader that missed could read and
				// refill the entry before the scheduler ran another (CI
				// once saw 1 read), and the demonstration showed nothing.
				reads.load = crowdedLoad(b.store.Product, 2*replicas+1, 2*time.Second)
			}
			rs := make([]*replica, replicas)
			for i := range rs {
				rs[i] = b.replica(t, reads, Options{Mode: mode})
			}
			ctx := context.Background()
			// The entry, as a refresh wrote it, about to expire.
			p, err := b.store.Product(ctx, "hot")
			if err != nil {
				t.Fatal(err)
			}
			if err := store(ctx, rs[0].rdb, "hot", p, false, time.Now().Add(-time.Second+50*time.Millisecond), time.Second); err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			var ready, done sync.WaitGroup
			var wrong atomic.Int64
			ready.Add(readers)
			for i := range readers {
				done.Go(func() {
					ready.Done()
					<-gate
					r, err := rs[i%replicas].Get(ctx, "hot")
					if err != nil || r.Product.Quantity != 100 {
						wrong.Add(1)
					}
				})
			}
			ready.Wait()
			testenv.WaitFor(t, "Redis to expire the entry", 5*time.Second, func() bool {
				n, err := rs[0].rdb.Exists(ctx, entryKey("hot")).Result()
				return err == nil && n == 0
			})
			start := time.Now()
			close(gate)
			done.Wait()
			elapsed := time.Since(start)
			n := reads.n.Load()
			waitFallbacks := 0
			for i, r := range rs {
				var counts []string
				for _, s := range []Source{SourceCache, SourceStale, SourceJoined, SourcePostgres} {
					counts = append(counts, string(s)+"="+strconv.Itoa(r.obs.answered(s)))
				}
				waitFallbacks += r.obs.fellBack(FallbackWait)
				t.Logf("replica %d answered %s; fell back after waiting %d", i, strings.Join(counts, " "), r.obs.fellBack(FallbackWait))
			}
			t.Logf("mode %s: %d readers on %d replicas, one expiry: %d Postgres reads; all answered in %v", mode, readers, replicas, n, elapsed)
			if w := wrong.Load(); w > 0 {
				t.Errorf("%d readers got an error or a wrong product", w)
			}
			switch mode {
			case Lock:
				if n > 2*replicas {
					t.Errorf("mode lock: %d Postgres reads for one expiry, want at most 2 per replica (%d)", n, 2*replicas)
				}
				if n > int64(1+waitFallbacks) {
					t.Errorf("mode lock: %d Postgres reads, %d of them after a wait: more than one replica refreshed the entry", n, waitFallbacks)
				}
			case NoLock:
				// The demonstration: nothing keeps the crowd off Postgres,
				// so it reads more than the lock ever lets it (82 to 475
				// of the 500 in runs here: how many miss before the first
				// refresh lands depends on the scheduling).
				if n <= 2*replicas {
					t.Errorf("mode nolock: %d Postgres reads for one expiry, want the stampede (more than %d)", n, 2*replicas)
				}
			}
		})
	}
}

// TestEveryAnswerIsWithinTheBound changes the product in Postgres all the
// while readers on two replicas read it, and checks every answer against
// the changes: each one shows every change committed more than the TTL
// before the read began.
func TestEveryAnswerIsWithinTheBound(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	const ttl = 100 * time.Millisecond
	rs := []*replica{b.replica(t, reads, Options{TTL: ttl}), b.replica(t, reads, Options{TTL: ttl})}
	ctx := context.Background()
	type commit struct {
		version int64
		by      time.Time // the commit had happened by then
	}
	var mu sync.Mutex
	commits := []commit{{0, time.Now()}}
	// newest is the newest version committed before t.
	newest := func(t time.Time) int64 {
		mu.Lock()
		defer mu.Unlock()
		v := int64(-1)
		for _, c := range commits {
			if c.by.Before(t) {
				v = c.version
			}
		}
		return v
	}
	writing := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(writing)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for range 400 {
			<-tick.C
			var v int64
			if err := b.pool.QueryRow(ctx, `UPDATE stock SET version = version + 1 WHERE product_id = 'p' RETURNING version`).Scan(&v); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			commits = append(commits, commit{v, time.Now()})
			mu.Unlock()
		}
	})
	var answers, late atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			for {
				select {
				case <-writing:
					return
				default:
				}
				start := time.Now()
				r, err := rs[i%2].Get(ctx, "p")
				if err != nil {
					t.Error(err)
					return
				}
				answers.Add(1)
				if want := newest(start.Add(-ttl)); r.Product.Version < want {
					late.Add(1)
					t.Errorf("a read begun at %s showed version %d (%s, %v old), but version %d was committed more than %v before",
						start.Format("15:04:05.000"), r.Product.Version, r.Source, r.Age(), want, ttl)
				}
			}
		})
	}
	wg.Wait()
	var cachedAnswers int
	for _, r := range rs {
		cachedAnswers += r.obs.answered(SourceCache) + r.obs.answered(SourceStale)
	}
	t.Logf("%d answers, %d from an entry, %d Postgres reads, %d past the bound", answers.Load(), cachedAnswers, reads.n.Load(), late.Load())
	if cachedAnswers == 0 || reads.n.Load() >= answers.Load() {
		t.Errorf("the cache answered %d of %d reads with %d Postgres reads: the test did not read through the cache", cachedAnswers, answers.Load(), reads.n.Load())
	}
}

func TestARestockDropsTheEntryAndItsRound(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	const ttl = 10 * time.Second
	c := b.replica(t, reads, Options{TTL: ttl})
	ctx := context.Background()
	old, err := c.Get(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// The restock's commit, then its drop.
	b.exec(t, `UPDATE stock SET round = 2, quantity = 7, initial = 7, version = version + 1 WHERE product_id = 'p'`)
	if err := c.Drop(ctx, "p", 2); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	// A refresh that read round 1 before the commit writes after the drop.
	if err := store(ctx, c.rdb, "p", old.Product, false, time.Now(), ttl); err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(ctx, "p")
	if err != nil || r.Source != SourcePostgres || r.Product.Round != 2 || r.Product.Quantity != 7 {
		t.Fatalf("Get after the drop = %+v, %v, want round 2 with 7 units, from postgres", r, err)
	}
	if r, err := c.Get(ctx, "p"); err != nil || r.Source != SourceCache || r.Product.Round != 2 {
		t.Errorf("the next Get = %+v, %v, want round 2 from the cache: an entry of the new round is written", r, err)
	}
}

func TestForgetLetsTheNextReadStartItsOwnLookup(t *testing.T) {
	var fs flights
	old, leader := fs.join("p")
	if !leader {
		t.Fatal("first join: not the leader")
	}
	if _, leader := fs.join("p"); leader {
		t.Fatal("second join led a lookup of its own while one was in flight")
	}
	fs.forget("p")
	fresh, leader := fs.join("p")
	if !leader || fresh == old {
		t.Fatal("a join after forget joined the forgotten lookup")
	}
	fs.land("p", old, Read{Source: SourceCache}, nil)
	if f, leader := fs.join("p"); leader || f != fresh {
		t.Error("the forgotten lookup's landing retired the lookup that replaced it")
	}
	<-old.done
}

func TestAProductThatDoesNotExistIsCachedUntilItIsCreated(t *testing.T) {
	b := newBackends(t)
	reads := &loads{load: b.store.Product}
	c := b.replica(t, reads, Options{TTL: 10 * time.Second})
	ctx := context.Background()
	for i := range 2 {
		if _, err := c.Get(ctx, "ghost"); !errors.Is(err, inventory.ErrNotFound) {
			t.Fatalf("Get #%d of a product that does not exist = %v, want ErrNotFound", i+1, err)
		}
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("Postgres read %d times, want 1 (the second answered from the cache)", n)
	}
	b.product(t, "ghost", 3)
	if err := c.Drop(ctx, "ghost", 1); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Get(ctx, "ghost"); err != nil || r.Product.Quantity != 3 {
		t.Errorf("Get after the creation's drop = %+v, %v, want 3 units", r, err)
	}
}

func TestWithRedisDownReadsComeFromPostgres(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	srv := testenv.RedisServer(t)
	reads := &loads{load: b.store.Product}
	c := replicaOn(t, client(t, srv.URL), reads, Options{})
	ctx := context.Background()
	if r, err := c.Get(ctx, "p"); err != nil || r.Source != SourcePostgres {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	// Down: the server shuts down (its files stay, for Restart).
	_ = client(t, srv.URL).ShutdownNoSave(ctx).Err()
	b.exec(t, `UPDATE stock SET quantity = 4 WHERE product_id = 'p'`)
	for i := range 3 {
		r, err := c.Get(ctx, "p")
		if err != nil || r.Source != SourcePostgres || r.Product.Quantity != 4 {
			t.Fatalf("Get #%d with Redis stopped = %+v, %v, want 4 units from postgres", i+1, r, err)
		}
	}
	if fb := c.obs.fellBack(FallbackRedis); fb != 3 {
		t.Errorf("Redis fallbacks = %d, want 3", fb)
	}
	if err := c.Drop(ctx, "p", 2); err == nil {
		t.Error("Drop with Redis stopped = nil, want the error")
	}
	// Back, and empty: reads go through it again (after the second its
	// failure rests it).
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "a read from the cache again", 10*time.Second, func() bool {
		r, err := c.Get(ctx, "p")
		if err != nil || r.Product.Quantity != 4 {
			t.Fatalf("Get with Redis back = %+v, %v, want 4 units", r, err)
		}
		return r.Source == SourceCache
	})
}

func TestOnARedisCluster(t *testing.T) {
	seeds := testenv.RedisCluster(t)
	b := newBackends(t)
	b.product(t, "p", 5)
	rdb := testenv.ClusterClient(seeds)
	t.Cleanup(func() { _ = rdb.Close() })
	reads := &loads{load: b.store.Product}
	c := replicaOn(t, rdb, reads, Options{})
	ctx := context.Background()
	for _, want := range []Source{SourcePostgres, SourceCache} {
		if r, err := c.Get(ctx, "p"); err != nil || r.Source != want || r.Product.Quantity != 5 {
			t.Fatalf("Get = %+v, %v, want 5 units from %s", r, err, want)
		}
	}
	b.exec(t, `UPDATE stock SET round = 2, quantity = 7 WHERE product_id = 'p'`)
	if err := c.Drop(ctx, "p", 2); err != nil {
		t.Fatalf("Drop on a cluster: %v", err)
	}
	if r, err := c.Get(ctx, "p"); err != nil || r.Product.Round != 2 {
		t.Errorf("Get after Drop = %+v, %v, want round 2", r, err)
	}
	if fb := c.obs.fellBack(FallbackRedis); fb != 0 {
		t.Errorf("%d reads fell back to Postgres: the cluster refused a command", fb)
	}
}

func TestOffAndExactReadPostgresEveryTime(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	reads := &loads{load: b.store.Product}
	off := replicaOn(t, nil, reads, Options{Mode: Off})
	on := b.replica(t, reads, Options{})
	ctx := context.Background()
	for range 2 {
		if r, err := off.Get(ctx, "p"); err != nil || r.Source != SourcePostgres {
			t.Fatalf("mode off: Get = %+v, %v, want postgres", r, err)
		}
		if r, err := on.Exact(ctx, "p"); err != nil || r.Source != SourcePostgres {
			t.Fatalf("Exact = %+v, %v, want postgres", r, err)
		}
	}
	if n := reads.n.Load(); n != 4 {
		t.Errorf("Postgres read %d times, want 4", n)
	}
	if err := off.Drop(ctx, "p", 2); err != nil {
		t.Errorf("mode off: Drop = %v, want nil (nothing to drop)", err)
	}
}

func TestABadProductIDReachesNeitherRedisNorPostgres(t *testing.T) {
	reads := &loads{load: func(context.Context, string) (inventory.Product, error) { return inventory.Product{}, nil }}
	c, err := New(nil, reads.Load, Options{Mode: Off})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "a b", "{x}", strings.Repeat("x", 65)} {
		if _, err := c.Get(context.Background(), id); !errors.Is(err, inventory.ErrBadProductID) {
			t.Errorf("Get(%q) = %v, want ErrBadProductID", id, err)
		}
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("Postgres read %d times, want 0", n)
	}
}

// TestALookupThatPanicsHoldsNoLaterRead: a lookup whose leader panicked
// (the recoverer answers it 500) must still land, or every later read of
// the product in the replica would join it and wait for nothing.
func TestALookupThatPanicsHoldsNoLaterRead(t *testing.T) {
	b := newBackends(t)
	b.product(t, "p", 5)
	var panicked atomic.Bool
	reads := &loads{load: func(ctx context.Context, id string) (inventory.Product, error) {
		if panicked.CompareAndSwap(false, true) {
			panic("a bug in the loader")
		}
		return b.store.Product(ctx, id)
	}}
	c := b.replica(t, reads, Options{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the loader's panic did not reach the read")
			}
		}()
		_, _ = c.Get(context.Background(), "p")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := c.Get(ctx, "p"); err != nil || r.Product.Quantity != 5 {
		t.Errorf("the read after a panicked lookup = %+v, %v, want 5 units", r, err)
	}
}

// TestAJoinedLookupOlderThanTheReadIsNotItsAnswer: a read that joins a
// lookup begun more than the TTL before it must not answer with that
// lookup's result, which is within the bound of the read that began it but
// past its own; it reads again. (Under a loaded fleet a joined answer came
// 0.7 ms past the bound in TestEveryAnswerIsWithinTheBound.)
func TestAJoinedLookupOlderThanTheReadIsNotItsAnswer(t *testing.T) {
	b := newBackends(t)
	b.product(t, "slow", 5)
	const ttl = 100 * time.Millisecond
	began, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	reads := &loads{load: func(ctx context.Context, id string) (inventory.Product, error) {
		if first.CompareAndSwap(false, true) {
			close(began)
			<-release // the first lookup's Postgres read hangs
		}
		return b.store.Product(ctx, id)
	}}
	r := b.replica(t, reads, Options{TTL: ttl})
	ctx := context.Background()
	leader := make(chan Read, 1)
	go func() {
		got, err := r.Get(ctx, "slow")
		if err != nil {
			t.Error(err)
		}
		leader <- got
	}()
	<-began
	// Past the TTL after the first lookup began, before it ends, a second
	// read begins and joins it (the wait is the scenario: the lookup's age).
	time.Sleep(ttl + 20*time.Millisecond)
	joined := make(chan Read, 1)
	start := time.Now()
	go func() {
		got, err := r.Get(ctx, "slow")
		if err != nil {
			t.Error(err)
		}
		joined <- got
	}()
	testenv.WaitFor(t, "the second read to join the first's lookup", 5*time.Second, func() bool {
		return r.flights.waiting("slow") > 0
	})
	close(release)
	<-leader
	got := <-joined
	if age := start.Sub(got.readAt); age > ttl {
		t.Errorf("a read begun %v after a lookup that answered it showed Postgres as of %v before it began (%s), want at most the TTL %v",
			ttl+20*time.Millisecond, age.Round(time.Millisecond), got.Source, ttl)
	}
}

// crowdedLoad is load, each call of which first waits until need calls
// have begun (or d has passed): a Postgres read that lasts while a crowd
// misses, so that every reader that misses meanwhile is counted, however
// the scheduler orders them. Readers kept off Postgres (mode lock) never
// make need calls: each waits d, and the count stays theirs.
func crowdedLoad(load Loader, need int64, d time.Duration) Loader {
	var begun atomic.Int64
	crowd := make(chan struct{})
	return func(ctx context.Context, id string) (inventory.Product, error) {
		if begun.Add(1) == need {
			close(crowd)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-crowd:
		case <-t.C:
		case <-ctx.Done():
			return inventory.Product{}, ctx.Err()
		}
		return load(ctx, id)
	}
}
