package localstack

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPostgresServersFromOneTemplateShareNothing: two servers started from
// the machine's initdb template are two clusters: a database made in one
// is not in the other, and the template itself is left as initdb made it.
func TestPostgresServersFromOneTemplateShareNothing(t *testing.T) {
	ctx := context.Background()
	var urls []string
	for range 2 {
		pg, err := StartPostgres(ctx, PostgresOptions{NoFsync: true})
		if err != nil {
			t.Fatalf("StartPostgres: %v", err)
		}
		t.Cleanup(func() { _ = pg.Stop() })
		urls = append(urls, pg.adminURL())
	}
	if err := exec1(ctx, urls[0], "CREATE DATABASE only_in_the_first"); err != nil {
		t.Fatalf("create a database in the first server: %v", err)
	}
	for i, url := range urls {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = 'only_in_the_first'").Scan(&n)
		conn.Close(ctx)
		if want := map[int]int{0: 1, 1: 0}[i]; err != nil || n != want {
			t.Errorf("server %d has %d databases only_in_the_first (%v), want %d", i, n, err, want)
		}
	}
	initdb, err := Ensure(ctx, "initdb")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := unprivileged()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := dataTemplate(ctx, initdb[0], cred)
	if err != nil {
		t.Fatalf("dataTemplate: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmpl, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("the template %s has a postmaster.pid (%v): a server ran on it, not on a copy", tmpl, err)
	}
}

// TestCompleteNeedsEveryFileAStartReads: a template missing any file a
// start reads is made again, not copied.
func TestCompleteNeedsEveryFileAStartReads(t *testing.T) {
	dir := t.TempDir()
	files := []string{"PG_VERSION", "global/pg_control", "postgresql.conf", "pg_hba.conf"}
	for i := range files {
		for j, f := range files {
			p := filepath.Join(dir, f)
			if j == i {
				os.Remove(p)
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if complete(dir) {
			t.Errorf("complete(a cluster without %s) = true, want false", files[i])
		}
	}
	if err := os.WriteFile(filepath.Join(dir, files[len(files)-1]), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !complete(dir) {
		t.Errorf("complete(every file) = false, want true")
	}
}
