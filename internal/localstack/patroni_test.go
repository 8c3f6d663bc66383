package localstack

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPatroniFailoverKeepsOrLosesAcknowledgedCommits crashes the primary
// of a Patroni cluster while its replication is held back and a commit is
// in flight, and reads the ledger on the standby Patroni promotes. With
// synchronous replication the commit made while the standby could not
// have it never returns (its connection dies with the primary) and every
// acknowledged row is on the new primary; asynchronously it is
// acknowledged, and the failover loses it: the demonstration of why the
// stack's default is synchronous. Either way the URL alone leads a new
// connection to the new primary. (The crashed primary's return as the new
// one's standby, pg_rewind and all, is pg-failover's Heal, which the fault
// matrix runs: waiting for it here would double this test's time.)
func TestPatroniFailoverKeepsOrLosesAcknowledgedCommits(t *testing.T) {
	etcd, err := StartEtcd(context.Background())
	if err != nil {
		t.Fatalf("StartEtcd: %v", err)
	}
	t.Cleanup(func() { _ = etcd.Stop() })
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			t.Parallel()
			failover(t, etcd.Endpoint, async)
		})
	}
}

func failover(t *testing.T, etcd string, async bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := StartPatroni(ctx, PatroniOptions{Etcd: etcd, Async: async})
	if err != nil {
		t.Fatalf("StartPatroni: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	t.Logf("primary and standby ready in %v", time.Since(began).Round(time.Millisecond))

	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatalf("connect %s: %v", c.URL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE TABLE ledger (id int PRIMARY KEY)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	const acked = 20
	for i := range acked {
		if _, err := conn.Exec(ctx, "INSERT INTO ledger VALUES ($1)", i); err != nil {
			t.Fatalf("INSERT %d: %v", i, err)
		}
	}
	primary, err := c.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	standby := c.Other(primary)
	release, err := primary.HoldBackReplication(ctx)
	if err != nil {
		t.Fatalf("HoldBackReplication: %v", err)
	}
	defer release()
	// The commit made while the standby cannot have it.
	held := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "INSERT INTO ledger VALUES ($1)", acked)
		held <- err
	}()
	var heldErr error
	if async {
		heldErr = <-held
		if heldErr != nil {
			t.Fatalf("INSERT %d with replication held back, asynchronous: %v, want it acknowledged", acked, heldErr)
		}
	} else {
		watch, err := pgx.Connect(ctx, primary.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close(context.WithoutCancel(ctx))
		waitCond(ctx, t, "the commit to wait for the synchronous standby (wait_event SyncRep)", func() bool {
			var n int
			err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&n)
			return err == nil && n == 1
		})
	}

	began = time.Now()
	if err := primary.Crash(); err != nil {
		t.Fatalf("Crash: %v", err)
	}
	if !async {
		if heldErr = <-held; heldErr == nil {
			t.Fatalf("INSERT %d waiting for the synchronous standby returned nil after the primary crashed, want its connection lost", acked)
		}
	}
	if err := c.WaitPrimary(ctx, standby, patroniWait); err != nil {
		t.Fatalf("the standby was not promoted: %v", err)
	}
	t.Logf("%s promoted %v after the crash", standby.Name, time.Since(began).Round(time.Millisecond))

	after, err := pgx.Connect(ctx, c.URL) // the same URL: pgx finds the writable member
	if err != nil {
		t.Fatalf("connect %s after the failover: %v", c.URL, err)
	}
	defer after.Close(context.WithoutCancel(ctx))
	if addr, ok := after.PgConn().Conn().RemoteAddr().(*net.TCPAddr); !ok || addr.Port != standby.Port {
		t.Errorf("after the failover the URL led to %v, want the new primary %s on port %d", after.PgConn().Conn().RemoteAddr(), standby.Name, standby.Port)
	}
	var n, below int
	if err := after.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE id < $1) FROM ledger", acked).Scan(&n, &below); err != nil {
		t.Fatalf("read the ledger on the new primary: %v", err)
	}
	if below != acked {
		t.Errorf("the new primary has %d of the %d rows acknowledged before replication was held back, want all", below, acked)
	}
	switch {
	case async && n != acked:
		t.Errorf("asynchronous: the new primary has %d rows, want %d: row %d, acknowledged while the standby could not have it, lost", n, acked, acked)
	case async:
		t.Logf("asynchronous: row %d was acknowledged and is not on the new primary: lost in the failover, as expected", acked)
	case n != acked:
		t.Errorf("synchronous: the new primary has %d rows, want %d (the commit that never returned never reached the standby)", n, acked)
	default:
		t.Logf("synchronous: the commit in flight failed (%v) and is not on the new primary; nothing acknowledged was lost", heldErr)
	}

	if _, err := after.Exec(ctx, "INSERT INTO ledger VALUES ($1)", acked+1); err != nil {
		t.Errorf("INSERT on the new primary: %v", err)
	}
	var pids []int
	for _, m := range c.Members {
		if pid, err := m.PostmasterPid(); err == nil {
			pids = append(pids, pid)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("after Stop postmaster %d still runs", pid)
		}
	}
}

// waitCond polls cond until it holds, failing the test when ctx ends.
func waitCond(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestPatroniStartsOnOtherPortsWhenOneIsTaken: when a member's Postgres
// finds its port bound by another process (between FreePort's probe and
// its bind), Patroni does not exit but restarts it again and again;
// StartPatroni sees that in the member's log and starts the cluster again
// on fresh ports, at once rather than after its two-minute wait. The first
// port handed out, the first member's Postgres port, is one this test
// holds.
func TestPatroniStartsOnOtherPortsWhenOneIsTaken(t *testing.T) {
	etcd, err := StartEtcd(context.Background())
	if err != nil {
		t.Fatalf("StartEtcd: %v", err)
	}
	defer func() { _ = etcd.Stop() }()
	takenPort, handed := takenFirst(t)

	ctx, cancel := context.WithTimeout(context.Background(), patroniWait)
	defer cancel()
	c, err := StartPatroni(ctx, PatroniOptions{Etcd: etcd.Endpoint})
	if err != nil {
		t.Fatalf("StartPatroni with a member's port taken = %v, want it started on other ports", err)
	}
	defer func() { _ = c.Stop() }()
	for _, m := range c.Members {
		if m.Port == takenPort {
			t.Errorf("%s runs Postgres on the taken port %d", m.Name, takenPort)
		}
	}
	if n := handed(); n < 8 {
		t.Errorf("%d ports handed out, want a second draw of 4", n)
	}
	if err := exec1(ctx, c.URL, "SELECT 1"); err != nil {
		t.Fatalf("the cluster's database: %v", err)
	}
}
