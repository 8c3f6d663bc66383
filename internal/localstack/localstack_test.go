package localstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestPostgresStartsAndServesQueries(t *testing.T) {
	ctx := context.Background()
	pg, err := StartPostgres(ctx, PostgresOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })

	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatalf("connect %s: %v", pg.URL, err)
	}
	defer conn.Close(ctx)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil || db != "inventory" {
		t.Fatalf("current_database() = %q, %v; want inventory", db, err)
	}
	other, err := pg.CreateDatabase(ctx, "other_db")
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if !strings.HasSuffix(strings.Split(other, "?")[0], "/other_db") {
		t.Errorf("CreateDatabase URL = %q, want it to name other_db", other)
	}
}

func TestRedisRestartLosesEveryKey(t *testing.T) {
	ctx := context.Background()
	r, err := StartRedis(ctx)
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()

	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	pid := r.Pid()
	if err := r.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.Pid() == pid {
		t.Errorf("Restart kept pid %d, want a new process", pid)
	}
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS k after restart = %d, %v; want 0, nil", n, err)
	}
}

func TestNginxProxiesToUpstream(t *testing.T) {
	ctx := context.Background()
	up, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Addr: hostPort(up), Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })}
	go srv.ListenAndServe()
	t.Cleanup(func() { _ = srv.Close() })

	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`events {}
http {
  access_log off;
  upstream app { server %s; }
  server { listen %s; location / { proxy_pass http://app; } }
}`, hostPort(up), hostPort(port))
	n, err := StartNginx(ctx, hostPort(port), map[string]string{"nginx.conf": conf})
	if err != nil {
		t.Fatalf("StartNginx: %v", err)
	}
	t.Cleanup(func() { _ = n.Stop() })

	var body []byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + n.Addr + "/")
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET through nginx: %v, body %q, logs:\n%s", err, body, n.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if string(body) != "hello" {
		t.Errorf("GET through nginx = %q, want hello", body)
	}
}

func TestStartNginxRejectsBadConfig(t *testing.T) {
	_, err := StartNginx(context.Background(), "127.0.0.1:1", map[string]string{"nginx.conf": "events {} http { nonsense; }"})
	if err == nil || !strings.Contains(err.Error(), "nginx -t") {
		t.Fatalf("StartNginx(bad config) = %v, want an nginx -t error", err)
	}
}

func TestStartNginxRefusesATakenAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conf := "events {} http { server { listen " + l.Addr().String() + "; } }"
	if _, err := StartNginx(context.Background(), l.Addr().String(), map[string]string{"nginx.conf": conf}); err == nil {
		t.Fatalf("StartNginx on an address another server holds = nil, want an error")
	}
}

func TestPostgresRestartImmediateLosesOpenTransactionsOnly(t *testing.T) {
	ctx := context.Background()
	pg, err := StartPostgres(ctx, PostgresOptions{}) // durable: NoFsync loses recent commits too

	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	pid := pg.Pid()
	if err := pg.RestartImmediate(ctx); err != nil {
		t.Fatalf("RestartImmediate: %v", err)
	}
	if pg.Pid() == pid {
		t.Errorf("RestartImmediate kept pid %d, want a new postmaster", pid)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Errorf("COMMIT of a transaction open across an immediate restart = nil, want an error")
	}
	conn2, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatalf("connect after RestartImmediate: %v", err)
	}
	defer conn2.Close(ctx)
	var n int
	if err := conn2.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows after restart = %d, %v; want 1 (the committed one), nil", n, err)
	}
}

// TestRedisRestartLosesWhatAReplicaSynced: a replica's full sync leaves a
// snapshot on disk; promoted and restarted, it must still come back empty,
// not with the data of that old sync.
func TestRedisRestartLosesWhatAReplicaSynced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, err := StartRedis(ctx)
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	defer primary.Stop()
	replica, err := StartRedis(ctx)
	if err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	defer replica.Stop()
	p := redis.NewClient(&redis.Options{Addr: primary.Addr})
	defer p.Close()
	r := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer r.Close()
	if err := p.Set(ctx, "old", "value", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicaOf(ctx, primary.Addr); err != nil {
		t.Fatal(err)
	}
	for r.Get(ctx, "old").Val() != "value" {
		select {
		case <-ctx.Done():
			t.Fatal("the replica never synced")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := replica.ReplicaOf(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("after a restart the former replica has %d keys (%v), want none", n, err)
	}
}
