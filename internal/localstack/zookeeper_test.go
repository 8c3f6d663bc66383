package localstack

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestZooKeeperStartsRestartsAndStops: the server answers ruok, comes back
// on the same address after Restart, and Stop removes its directory.
func TestZooKeeperStartsRestartsAndStops(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	z, err := StartZooKeeper(ctx, ZooKeeperOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("StartZooKeeper: %v", err)
	}
	t.Logf("ZooKeeper ready on %s in %v", z.Addr, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = z.Stop() })

	pid := z.Pid()
	start = time.Now()
	if err := z.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	t.Logf("restarted in %v", time.Since(start).Round(time.Millisecond))
	if z.Pid() == pid {
		t.Errorf("Restart kept pid %d, want a new process", pid)
	}
	if err := z.ruok(ctx); err != nil {
		t.Errorf("ruok after Restart: %v", err)
	}
	if err := z.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := os.Stat(z.dir); !os.IsNotExist(err) {
		t.Errorf("after Stop, %s still exists (%v)", z.dir, err)
	}
	if err := z.ruok(ctx); err == nil {
		t.Errorf("ruok after Stop succeeded, want no server")
	}
}
