package settings

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var errUnknown = errors.New("unknown")

func known(name string) error {
	if name == "a" || name == "b" || name == "c" {
		return nil
	}
	return errUnknown
}

// database returns the URL of a fresh, migrated database.
func database(t *testing.T) string {
	t.Helper()
	url := testenv.PostgresURL(t)
	pool := connect(t, url)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	return url
}

func connect(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// stored is the settings row: the value and its version.
func stored(t *testing.T, pool *pgxpool.Pool) (string, int64) {
	t.Helper()
	var v string
	var version int64
	if err := pool.QueryRow(context.Background(), `SELECT value, version FROM settings WHERE name = $1`, StrategySetting).Scan(&v, &version); err != nil {
		t.Fatalf("read the settings row: %v", err)
	}
	return v, version
}

// replica is one replica's Strategy on a pool of its own, following
// switches (Run) until the test ends.
func replica(t *testing.T, url string, opts Options) *Strategy {
	t.Helper()
	s := NewStrategy(connect(t, url), known, opts)
	follow(t, s)
	return s
}

// follow runs s.Run until the test ends, and waits for it to return.
func follow(t *testing.T, s *Strategy) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestInitDoesNotOverwriteAStoredDefault(t *testing.T) {
	ctx := context.Background()
	pool := connect(t, database(t))
	first, second := NewStrategy(pool, known, Options{}), NewStrategy(pool, known, Options{})
	if err := first.Init(ctx, "a"); err != nil {
		t.Fatalf("Init(a) = %v", err)
	}
	if err := second.Init(ctx, "b"); err != nil {
		t.Fatalf("Init(b) = %v", err)
	}
	if got, err := second.Get(ctx); got != "a" || err != nil {
		t.Errorf("Get after Init(a), Init(b) = %q, %v; want a, nil", got, err)
	}
	if got, version := stored(t, pool); got != "a" || version != 1 {
		t.Errorf("Postgres holds %q version %d after Init(a), Init(b); want a version 1", got, version)
	}
}

func TestInitAfterASwitchKeepsTheSwitch(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	first := NewStrategy(connect(t, url), known, Options{})
	if err := first.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := first.Set(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	// A replica starting (or restarting) now, configured with a.
	late := NewStrategy(connect(t, url), known, Options{})
	if err := late.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := late.Get(ctx); got != "b" || err != nil {
		t.Errorf("Get on a replica started after the switch = %q, %v; want b", got, err)
	}
}

func TestInitReplacesAStoredNameItDoesNotKnow(t *testing.T) {
	ctx := context.Background()
	pool := connect(t, database(t))
	if _, err := pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, 'retired')`, StrategySetting); err != nil {
		t.Fatal(err)
	}
	s := NewStrategy(pool, known, Options{})
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatalf("Init(a) with Postgres holding an unknown name = %v", err)
	}
	got, err := s.Get(ctx)
	if value, version := stored(t, pool); got != "a" || err != nil || value != "a" || version != 2 {
		t.Errorf("Get = %q, %v, Postgres %q version %d; want a everywhere, version 2", got, err, value, version)
	}
}

func TestSetAndInitRefuseUnknownNames(t *testing.T) {
	ctx := context.Background()
	pool := connect(t, database(t))
	s := NewStrategy(pool, known, Options{})
	if err := s.Init(ctx, "zzz"); !errors.Is(err, errUnknown) {
		t.Errorf("Init(zzz) = %v, want errUnknown", err)
	}
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "zzz"); !errors.Is(err, errUnknown) {
		t.Errorf("Set(zzz) = %v, want errUnknown", err)
	}
	if got, version := stored(t, pool); got != "a" || version != 1 {
		t.Errorf("Postgres holds %q version %d after Set(zzz); want a version 1", got, version)
	}
}

func TestEveryReplicaFollowsTheMomentASwitchReturns(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	// A lease far longer than the test: a switch can return only because
	// every replica followed it, never because an old lease ran out.
	opts := Options{Lease: time.Hour}
	replicas := []*Strategy{replica(t, url, opts), replica(t, url, opts), replica(t, url, opts)}
	if err := replicas[0].Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// Init waits for no other replica (each replica's own Init is what
	// brings it along at start): the others follow its notification when
	// it arrives. Once they have, every Set must find them following.
	for i, r := range replicas[1:] {
		testenv.WaitFor(t, fmt.Sprintf("replica %d to follow Init's default a", i+1), 10*time.Second, func() bool {
			got, err := r.Get(ctx)
			return got == "a" && err == nil
		})
	}
	names := []string{"b", "c", "a"}
	for i := range 30 {
		name := names[i%len(names)]
		by := i % len(replicas)
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := replicas[by].Set(sctx, name)
		cancel()
		if err != nil {
			t.Fatalf("switch %d: replica %d Set(%s) = %v", i, by, name, err)
		}
		for j, r := range replicas {
			if got, err := r.Get(ctx); got != name || err != nil {
				t.Errorf("switch %d to %s by replica %d: replica %d Get = %q, %v the moment Set returned", i, name, by, j, got, err)
			}
		}
	}
	if _, version := stored(t, connect(t, url)); version != 31 {
		t.Errorf("version after 30 switches = %d, want 31", version)
	}
}

func TestASwitchWaitsOutAReplicaThatDoesNotFollow(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	lease := 300 * time.Millisecond
	one := replica(t, url, Options{Lease: lease})
	if err := one.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// two holds a lease on a but does not listen (as a replica that is
	// paused, cut off or killed).
	two := NewStrategy(connect(t, url), known, Options{Lease: lease})
	if got, err := two.Get(ctx); got != "a" || err != nil {
		t.Fatalf("Get = %q, %v; want a", got, err)
	}
	if err := one.Set(ctx, "b"); err != nil {
		t.Fatalf("Set(b) = %v", err)
	}
	if got, err := two.Get(ctx); got != "b" || err != nil {
		t.Errorf("the silent replica's Get once Set(b) returned = %q, %v; want b (its lease on a must have run out)", got, err)
	}

	// A switch whose caller gives up waiting still happened, and says so.
	if got, err := two.Get(ctx); got != "b" || err != nil {
		t.Fatal(got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := one.Set(cctx, "c"); err == nil || !strings.Contains(err.Error(), "switched") || !errors.Is(err, context.Canceled) {
		t.Errorf("Set(c) with the caller gone while two holds b = %v; want an error saying it switched, wrapping context.Canceled", err)
	}
	if got, _ := stored(t, connect(t, url)); got != "c" {
		t.Errorf("Postgres holds %q after Set(c) gave up waiting; want c", got)
	}
}

func TestAFailedCommitChangesNothing(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	pool := connect(t, url)
	one, two := replica(t, url, Options{}), replica(t, url, Options{})
	if err := one.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// A deferred constraint trigger fails the COMMIT itself, after every
	// statement of the switch has run.
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.value = 'b' THEN RAISE EXCEPTION 'no b today'; END IF;
			RETURN NEW;
		END $$;
		CREATE CONSTRAINT TRIGGER refuse_b AFTER UPDATE ON settings
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_b();`); err != nil {
		t.Fatal(err)
	}
	if err := one.Set(ctx, "b"); err == nil || !strings.Contains(err.Error(), "no b today") {
		t.Fatalf("Set(b) with its COMMIT refused = %v, want the COMMIT's error", err)
	}
	if got, version := stored(t, pool); got != "a" || version != 1 {
		t.Errorf("Postgres holds %q version %d after a failed switch; want a version 1", got, version)
	}
	for i, r := range []*Strategy{one, two} {
		if got, err := r.Get(ctx); got != "a" || err != nil {
			t.Errorf("replica %d Get after a failed switch = %q, %v; want a", i, got, err)
		}
	}
	var newer int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM setting_leases WHERE version > 1`).Scan(&newer); err != nil || newer != 0 {
		t.Errorf("leases on a version above 1 after a failed switch: %d, %v; want 0", newer, err)
	}
}

func TestWithPostgresGoneTheLeaseRunsOutAndGetSaysSo(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var out logs
	lease := 500 * time.Millisecond
	s := NewStrategy(pool, known, Options{Lease: lease, Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err := s.Init(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	follow(t, s)
	pool.Close() // Postgres unreachable from here on
	testenv.WaitFor(t, "Get failing once the lease ran out", 10*time.Second, func() bool {
		got, err := s.Get(ctx)
		if err == nil && got != "b" {
			t.Fatalf("Get with Postgres gone = %q, nil; want b while the lease runs", got)
		}
		if err != nil && got != "" {
			t.Fatalf("Get with Postgres gone and the lease over = %q, %v; want \"\" (no guess)", got, err)
		}
		return err != nil
	})
	// Several renewals have failed by now (one every lease/4), and the
	// many Gets above: one line says so.
	if n := out.count("WARN"); n != 1 {
		t.Errorf("renewals failing logged %d WARN lines, want 1:\n%s", n, out.String())
	}
	fresh := NewStrategy(pool, known, Options{})
	if got, err := fresh.Get(ctx); got != "" || err == nil {
		t.Errorf("a fresh replica's Get with Postgres gone = %q, %v; want \"\" and an error", got, err)
	}
}

func TestRunGivesTheLeaseUpWhenItStops(t *testing.T) {
	ctx := context.Background()
	pool := connect(t, database(t))
	s := NewStrategy(pool, known, Options{Instance: "replica-x"})
	if err := s.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	leases := func() (n int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM setting_leases WHERE instance = 'replica-x' AND expires_at > clock_timestamp()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := leases(); n != 1 {
		t.Fatalf("running leases of replica-x after Init = %d, want 1", n)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(rctx) }()
	cancel()
	<-done
	if n := leases(); n != 0 {
		t.Errorf("running leases of replica-x after Run returned = %d, want 0", n)
	}
}

func TestConcurrentSwitchesLeaveEveryReplicaOnPostgresValue(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	one, two := replica(t, url, Options{}), replica(t, url, Options{})
	if err := one.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 50 {
		for j, s := range []*Strategy{one, two} {
			wg.Go(func() {
				<-start
				name := []string{"a", "b"}[(i+j)%2]
				if err := s.Set(ctx, name); err != nil {
					errs <- fmt.Errorf("Set(%s): %w", name, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want, version := stored(t, connect(t, url))
	if version != 101 {
		t.Errorf("version after 100 switches = %d, want 101", version)
	}
	for i, r := range []*Strategy{one, two} {
		if got, err := r.Get(ctx); got != want || err != nil {
			t.Errorf("replica %d Get after 100 concurrent switches = %q, %v; Postgres holds %q", i, got, err, want)
		}
	}
}

func TestACancelledCallerGetsTheLeasedCopy(t *testing.T) {
	s := NewStrategy(connect(t, database(t)), known, Options{})
	if err := s.Init(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := s.Get(ctx); got != "a" || err != nil {
		t.Errorf("Get with a cancelled context = %q, %v; want a, nil", got, err)
	}
}

type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) count(level string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "level="+level)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// BenchmarkGet is what a sale naming no strategy pays to learn the
// default: the leased copy, read in memory.
func BenchmarkGet(b *testing.B) {
	url := testenv.PostgresURL(b)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	if err := migrations.Up(context.Background(), db); err != nil {
		b.Fatal(err)
	}
	_ = db.Close()
	s := NewStrategy(pool, known, Options{Lease: time.Hour})
	ctx := context.Background()
	if err := s.Init(ctx, "a"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if name, err := s.Get(ctx); name != "a" || err != nil {
				b.Fatalf("Get = %q, %v", name, err)
			}
		}
	})
}

// TestASwitchWaitsForTheSalesOfTheOldDefault: a sale on b began with the
// default a (Use) and is still running when a switch to b is made. b
// follows the switch at once, but the switch must not return while that
// sale runs, however many leases pass (b keeps renewing its lease on the
// old version); it returns once the sale is answered. Before, a switch
// returned as soon as b had read the new default, and b's sale of the old
// one (an unsafe none, say) could still commit after the answer.
func TestASwitchWaitsForTheSalesOfTheOldDefault(t *testing.T) {
	ctx := context.Background()
	url := database(t)
	// Long enough that b's renewals (every lease/4) do not lapse on a busy
	// machine: with 200 ms, CI once saw b's lease run out between two
	// renewals, and the switch rightly stopped waiting for a replica whose
	// lease had ended, which is not what this test is about.
	lease := time.Second
	a := replica(t, url, Options{Lease: lease})
	if err := a.Init(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	b := replica(t, url, Options{Lease: lease})
	testenv.WaitFor(t, "b to follow Init's default a", 10*time.Second, func() bool {
		got, err := b.Get(ctx)
		return got == "a" && err == nil
	})
	name, done, err := b.Use(ctx)
	if name != "a" || err != nil {
		t.Fatalf("b.Use = %q, %v; want a", name, err)
	}
	switched := make(chan error, 1)
	go func() { switched <- a.Set(ctx, "b") }()
	testenv.WaitFor(t, "b to read the switch", 10*time.Second, func() bool {
		got, err := b.Get(ctx)
		return got == "b" && err == nil
	})
	// Several leases pass, b renewing its lease all along.
	pool := connect(t, url)
	after := time.Now().Add(3 * lease)
	testenv.WaitFor(t, "b to renew its lease past three leases from now", 10*time.Second, func() bool {
		var until time.Time
		var version int64
		err := pool.QueryRow(ctx, `SELECT expires_at, version FROM setting_leases WHERE holder = $1`, b.holder).Scan(&until, &version)
		if err == nil && version != 1 {
			t.Fatalf("b's lease is on version %d while its sale of version 1 runs, want 1", version)
		}
		return err == nil && until.After(after)
	})
	select {
	case err := <-switched:
		t.Fatalf("Set(b) = %v while a sale of the old default still ran on b; want it to wait for the sale", err)
	default:
	}
	done()
	select {
	case err := <-switched:
		if err != nil {
			t.Errorf("Set(b) once the sale ended = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Set(b) still waiting 10 s after the last sale of the old default ended")
	}
	done() // a second call is a no-op
}
