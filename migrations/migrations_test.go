package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
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
	for _, table := range []string{"stock", "sales", "rounds", "settings", "setting_leases", "soldout_marks", "locks"} {
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
	var def struct {
		version, fence, pglockFence int64
		round                       int
		name                        string
	}
	if err := db.QueryRowContext(ctx, `SELECT version, fence, pglock_fence, round, name FROM stock WHERE product_id = 'p'`).
		Scan(&def.version, &def.fence, &def.pglockFence, &def.round, &def.name); err != nil {
		t.Fatalf("read defaults: %v", err)
	}
	if def.version != 0 || def.fence != 0 || def.pglockFence != 0 || def.round != 1 || def.name != "" {
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
	for _, table := range []string{"stock", "sales", "rounds", "settings", "setting_leases", "soldout_marks", "locks"} {
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
