package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/internal/localstack"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, deadline time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("echo garbled: " + line)
	}
	return time.Since(start), err
}

func TestNetProxyLatencyCutAndHeal(t *testing.T) {
	p, err := Start("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("through a whole link: %v", err)
	}

	if err := p.AddLatency(100*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	// Both ways delayed: at least twice the latency per round trip.
	if d, err := roundTrip(c, r, 5*time.Second); err != nil || d < 200*time.Millisecond {
		t.Fatalf("with 100ms latency each way: round trip %s, %v; want at least 200ms", d, err)
	}
	p.Heal(context.Background())

	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(c, r, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a cut link: %v; want silence until the deadline", err)
	}
	p.Heal(context.Background())
	// The cut connection is closed by the heal; a new one goes through.
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the connection cut across a heal still answers; want it closed")
	}
	c2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2), 5*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}

// postgresLink starts a Postgres and a link to it, and returns the link,
// a connection straight to Postgres, and the URL through the link; all
// are closed when the test ends.
func postgresLink(ctx context.Context, t *testing.T) (link *Proxy, direct *pgx.Conn, viaLink string) {
	t.Helper()
	pg, err := localstack.StartPostgres(ctx, localstack.PostgresOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	link, err = Start("postgres", fmt.Sprintf("127.0.0.1:%d", pg.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Stop)
	direct, err = pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close(context.Background()) })
	return link, direct, strings.Replace(pg.URL, fmt.Sprintf("127.0.0.1:%d", pg.Port), link.Addr, 1)
}

// TestLoseCommitReply: through a Postgres link with the toxic, COMMIT
// commits but its reply never arrives; the next COMMIT's does.
func TestLoseCommitReply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	link, direct, viaLink := postgresLink(ctx, t)
	if _, err := direct.Exec(ctx, `CREATE TABLE t (n int)`); err != nil {
		t.Fatal(err)
	}
	insert := func(n int) error {
		conn, err := pgx.Connect(ctx, viaLink)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, n); err != nil {
			t.Fatal(err)
		}
		return tx.Commit(ctx)
	}

	struck, err := link.LoseCommitReply()
	if err != nil {
		t.Fatal(err)
	}
	if err := insert(1); err == nil {
		t.Fatal("COMMIT through the toxic answered; want its reply lost")
	}
	if !struck() {
		t.Fatal("struck() = false after a lost reply")
	}
	if err := insert(2); err != nil {
		t.Fatalf("the second COMMIT: %v; the toxic strikes once", err)
	}
	var rows []int
	r, err := direct.Query(ctx, `SELECT n FROM t ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = pgx.CollectRows(r, pgx.RowTo[int]); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %v: want both committed, the one whose reply was lost too", rows)
	}
}

// TestLoseTheReplyOfACallThatCommittedOnItsOwn: a procedure CALLed outside
// a transaction block commits on its own (the one-statement sale); the
// toxic drops that reply too, and only once it committed: a CALL inside a
// transaction block, and a plain autocommit SELECT, pass.
func TestLoseTheReplyOfACallThatCommittedOnItsOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	link, direct, viaLink := postgresLink(ctx, t)
	if _, err := direct.Exec(ctx, `CREATE TABLE t (n int);
		CREATE PROCEDURE put(m int, OUT done int) LANGUAGE plpgsql AS $$ BEGIN INSERT INTO t VALUES (m); done := m; END $$`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, viaLink)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	struck, err := link.LoseCommitReply()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT 1`).Scan(&n); err != nil {
		t.Fatalf("an autocommit SELECT through the toxic: %v; want it answered", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `CALL put(1, NULL)`).Scan(&n); err != nil {
		t.Fatalf("a CALL inside a transaction block: %v; want it answered", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if struck() {
		t.Fatal("struck() = true before any commit")
	}
	if err := conn.QueryRow(ctx, `CALL put(2, NULL)`).Scan(&n); err == nil {
		t.Fatal("a CALL outside a transaction block answered; want its reply lost")
	}
	if !struck() {
		t.Fatal("struck() = false after a lost reply")
	}
	var got []int
	r, err := direct.Query(ctx, `SELECT n FROM t ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = pgx.CollectRows(r, pgx.RowTo[int]); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 2 {
		t.Fatalf("rows %v: want [2], the CALL whose reply was lost committed", got)
	}
}

// greeter writes hello and closes every connection it accepts.
func greeter(t *testing.T, hello string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(hello + "\n"))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestNetProxyRedirect(t *testing.T) {
	p, err := Start("greeter", greeter(t, "first"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	greeting := func() string {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("read the greeting: %v", err)
		}
		return line
	}
	if g := greeting(); g != "first\n" {
		t.Fatalf("before the redirect: %q, want first", g)
	}
	if err := p.Redirect(greeter(t, "second")); err != nil {
		t.Fatal(err)
	}
	if g := greeting(); g != "second\n" {
		t.Fatalf("after the redirect: %q, want second", g)
	}
}
