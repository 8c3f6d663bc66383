package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"inventory/internal/testenv"
	"inventory/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// openDB opens a *sql.DB on its own pool, as one replica would.
func openDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgxpool.New(%s): %v", url, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close(); pool.Close() })
	return db
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var ok bool
	if err := db.QueryRow(`SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok); err != nil {
		t.Fatalf("to_regclass(%s): %v", name, err)
	}
	return ok
}

// TestUpConcurrent runs Up from two "replicas" at once on a fresh database:
// both must succeed and the schema must be applied exactly once.
func TestUpConcurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testenv.PostgresURL(t)
	dbs := []*sql.DB{openDB(t, url), openDB(t, url)}

	start := make(chan struct{})
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = migrations.Up(ctx, db)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Up = %v, want nil", i, err)
		}
	}

	db := dbs[0]
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations = %v, %v", files, err)
	}
	latest := int64(len(files)) // numbered 00001, 00002, … without gaps
	var applied, rows int
	if err := db.QueryRow(`SELECT count(DISTINCT version_id), count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied, &rows); err != nil {
		t.Fatalf("count applied migrations: %v", err)
	}
	if applied != len(files) || rows != len(files) {
		t.Errorf("goose_db_version: %d versions in %d rows, want %d in %d (each applied once)", applied, rows, len(files), len(files))
	}
	for _, table := range []string{"stock", "sales", "rounds", "settings", "setting_leases", "soldout_marks", "locks", "fences"} {
		if !tableExists(t, db, table) {
			t.Errorf("table %s missing after Up", table)
		}
	}
	v, err := migrations.Version(ctx, db)
	if err != nil || v != latest {
		t.Errorf("Version = %d, %v; want %d, nil", v, err, latest)
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Errorf("second Up = %v, want nil (nothing to do)", err)
	}
}

// TestSchema checks the parts of the schema the strategies rely on.
func TestSchema(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, testenv.PostgresURL(t))
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("Up: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO stock (product_id, quantity, initial) VALUES ('p', 1, 1)`); err != nil {
		t.Fatalf("insert stock: %v", err)
	}
	cases := []struct {
		name    string
		sql     string
		wantErr bool
	}{
		{"negative stock is allowed", `UPDATE stock SET quantity = -5 WHERE product_id = 'p'`, false},
		{"sale with defaults", `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ('p', 1, 1, 'none', 'a')`, false},
		{"zero quantity refused", `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ('p', 1, 0, 'none', 'a')`, true},
		{"unknown product refused", `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ('nope', 1, 1, 'none', 'a')`, true},
		{"first key", `INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key) VALUES ('p', 1, 1, 'none', 'a', 'k')`, false},
		{"duplicate key refused", `INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key) VALUES ('p', 1, 1, 'none', 'a', 'k')`, true},
		{"many null keys", `INSERT INTO sales (product_id, round, quantity, strategy, instance) VALUES ('p', 1, 1, 'none', 'a')`, false},
		{"first sale key", `INSERT INTO sales (product_id, round, quantity, strategy, instance, sale_key) VALUES ('p', 1, 1, 'none', 'a', 's')`, false},
		{"duplicate sale key refused", `INSERT INTO sales (product_id, round, quantity, strategy, instance, sale_key) VALUES ('p', 1, 1, 'none', 'a', 's')`, true},
		{"a round remembered", `INSERT INTO rounds (product_id, round, initial) VALUES ('p', 1, 1)`, false},
		{"the same round twice refused", `INSERT INTO rounds (product_id, round, initial) VALUES ('p', 1, 5)`, true},
		{"a round of an unknown product refused", `INSERT INTO rounds (product_id, round, initial) VALUES ('nope', 1, 1)`, true},
	}
	for _, c := range cases {
		_, err := db.ExecContext(ctx, c.sql)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: Exec(%q) = %v, want error %v", c.name, c.sql, err, c.wantErr)
		}
	}
	// A product's fences are rows of fences, none until a lock holder
	// claims the product: every counter's fence starts at 0.
	var def struct {
		version, fences int64
		round           int
		name            string
	}
	if err := db.QueryRowContext(ctx, `SELECT version, (SELECT count(*) FROM fences WHERE product_id = 'p'), round, name FROM stock WHERE product_id = 'p'`).
		Scan(&def.version, &def.fences, &def.round, &def.name); err != nil {
		t.Fatalf("read defaults: %v", err)
	}
	if def.version != 0 || def.fences != 0 || def.round != 1 || def.name != "" {
		t.Errorf("stock defaults = %+v, want version 0, fences 0, round 1, name empty", def)
	}
}

// TestDown checks that the Down migration undoes Up and Up can run again.
func TestDown(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, testenv.PostgresURL(t))
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("Up: %v", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("DownTo(0): %v", err)
	}
	for _, table := range []string{"stock", "sales", "rounds", "settings", "setting_leases", "soldout_marks", "locks", "fences"} {
		if tableExists(t, db, table) {
			t.Errorf("table %s still there after Down", table)
		}
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
	if !tableExists(t, db, "sales") {
		t.Errorf("table sales missing after Up, Down, Up")
	}
}

// TestFencesCarriedOver: the migration that made each fence a row of
// fences carries every product's tokens over from the columns of stock,
// one row per counter that had one, and its Down puts them back.
func TestFencesCarriedOver(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, testenv.PostgresURL(t))
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	const before, fencesAsRows = 10, 11
	if _, err := p.UpTo(ctx, before); err != nil {
		t.Fatalf("UpTo(%d): %v", before, err)
	}
	const columns = `fence, fair_fence, pglock_fence, redlock_fence, etcd_fence, zookeeper_fence`
	for _, q := range []string{
		`INSERT INTO stock (product_id, quantity, initial) VALUES ('a', 1, 1), ('b', 1, 1), ('c', 1, 1)`,
		`UPDATE stock SET (` + columns + `) = (1, 2, 3, 4, 5, 6) WHERE product_id = 'a'`,
		`UPDATE stock SET etcd_fence = 7 WHERE product_id = 'b'`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := p.UpTo(ctx, fencesAsRows); err != nil {
		t.Fatalf("UpTo(%d): %v", fencesAsRows, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT product_id || ' ' || backend || ' ' || token FROM fences ORDER BY 1`)
	if err != nil {
		t.Fatalf("read fences: %v", err)
	}
	var got []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a etcdlock 5", "a pglock 3", "a redislock 1", "a redislock/fair 2", "a redlock 4", "a zklock 6", "b etcdlock 7"}
	if !slices.Equal(got, want) {
		t.Errorf("fences after the migration = %q, want %q", got, want)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'stock' AND column_name LIKE '%fence'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("stock has %d fence columns after the migration (%v), want 0", n, err)
	}
	if _, err := p.DownTo(ctx, before); err != nil {
		t.Fatalf("DownTo(%d): %v", before, err)
	}
	var a, b [6]int64
	for id, dst := range map[string]*[6]int64{"a": &a, "b": &b} {
		if err := db.QueryRowContext(ctx, `SELECT `+columns+` FROM stock WHERE product_id = $1`, id).
			Scan(&dst[0], &dst[1], &dst[2], &dst[3], &dst[4], &dst[5]); err != nil {
			t.Fatalf("read %s's fence columns after Down: %v", id, err)
		}
	}
	if a != [6]int64{1, 2, 3, 4, 5, 6} || b != [6]int64{0, 0, 0, 0, 7, 0} {
		t.Errorf("fence columns after Down: a %v, b %v; want a [1 2 3 4 5 6], b [0 0 0 0 7 0]", a, b)
	}
	if tableExists(t, db, "fences") {
		t.Errorf("table fences still there after Down")
	}
}
