package fleet

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/client"
	"inventory/internal/localstack"

	"inventory/internal/testenv"
)

// TestPausedReplicaCannotSellWhatItNoLongerHolds pauses a replica with
// SIGSTOP inside its critical section for longer than the lock's TTL; its
// watchdog is paused with it, so the lock expires and the other replica takes
// it and sells the last unit. When the paused replica resumes, its stale sale
// must not land: the reentrant strategy's fencing token is refused by
// Postgres (or its lease context is already cancelled), and it answers 503.
func TestPausedReplicaCannotSellWhatItNoLongerHolds(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	f, err := Start(context.Background(), Options{Binary: binary, NoFsync: true, AdminToken: "tok",
		// 1.5 s of work, under a 2 s TTL: the SIGSTOP must land while the
		// sale is inside it (with 400 ms, four test binaries at once, the
		// sale had committed before the stop); a stop that still misses
		// is tried again, on a new round.
		Env: map[string]string{"INVENTORY_LOCK_TTL": "2s", "INVENTORY_WORK_DELAY": "1500ms", "INVENTORY_LOG_LEVEL": "debug"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	paused, other := f.Replicas[0], f.Replicas[1]

	ctx := context.Background()
	var stale chan answer
	for try := 1; ; try++ {
		if p, err := f.Client().Restock(ctx, "sku-pause", client.RestockRequest{Quantity: 1}); err != nil || p.Round != int64(try) {
			t.Fatalf("PUT /products/sku-pause = %+v, %v; want round %d", p, err, try)
		}
		stale = make(chan answer, 1)
		go func() { stale <- sell(t, paused) }()
		// It holds the lock, has claimed the row with its fence and read 1
		// unit left, and is working: its sale's transaction sits idle in
		// Postgres, the claim its last statement.
		testenv.WaitFor(t, "the sale to be inside its work, row claimed", 15*time.Second, func() bool {
			return testenv.SalesAtWork(t, f.PostgresURL) > 0
		})
		if err := localstack.Pause(paused.Pid()); err != nil {
			t.Fatalf("pause %s: %v", paused.Instance, err)
		}
		if testenv.SalesAtWork(t, f.PostgresURL) > 0 {
			break
		}
		// Stopped after its sale's transaction ended: the pause missed.
		if err := syscall.Kill(paused.Pid(), syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT %s: %v", paused.Instance, err)
		}
		got := <-stale
		if try == 3 {
			t.Fatalf("%d tries: %s stopped each time after its sale had ended (the last answered %v)", try, paused.Instance, got)
		}
		t.Logf("try %d: %s stopped after its sale had ended (answered %v); again", try, paused.Instance, got)
	}
	// Its watchdog is paused too, so the lease runs out in Redis.
	rdb := redis.NewClient(mustParseRedisURL(t, f.RedisURL))
	defer rdb.Close()
	testenv.WaitFor(t, "the paused replica's lock to expire in Redis", 15*time.Second, func() bool {
		n, err := rdb.Exists(context.Background(), "lock:{sku-pause}").Result()
		return err == nil && n == 0
	})
	if got := sell(t, other); got.status != http.StatusOK {
		_ = syscall.Kill(paused.Pid(), syscall.SIGCONT)
		t.Fatalf("sale on %s while %s is paused = %v, want 200 (the expired lock is free)\n%s", other.Instance, paused.Instance, got, other.Logs())
	}
	if err := syscall.Kill(paused.Pid(), syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %s: %v", paused.Instance, err)
	}
	if got := <-stale; got.status != http.StatusServiceUnavailable {
		t.Errorf("the paused replica's sale after resuming = %v, want 503 (lock lost, rolled back)\n%s", got, paused.Logs())
	}

	p, err := f.Client().Product(ctx, "sku-pause")
	if err != nil {
		t.Fatal(err)
	}
	if p.Quantity != 0 || p.Sold != 1 || p.Sales != 1 {
		t.Errorf("after the pause: quantity %d, sold %d, ledger rows %d; want 0, 1, 1 (no oversell)", p.Quantity, p.Sold, p.Sales)
	}
}

// answer is a sale's HTTP status and, unless it sold, its problem.
type answer struct {
	status int
	err    error
}

func (a answer) String() string {
	if a.err == nil {
		return fmt.Sprint(a.status)
	}
	return fmt.Sprintf("%d (%v)", a.status, a.err)
}

// sell buys one unit of sku-pause from r with the reentrant strategy
// (naming it takes the admin token) and returns the answer.
func sell(t *testing.T, r *Replica) answer {
	_, err := r.Client().Sell(context.Background(), client.SaleRequest{ProductID: "sku-pause", Quantity: 1}, client.SaleOptions{Strategy: "reentrant"})
	if client.StatusOf(err) == 0 {
		t.Errorf("POST %s/sale: %v", r.URL, err)
	}
	return answer{client.StatusOf(err), err}
}

func mustParseRedisURL(t *testing.T, url string) *redis.Options {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis.ParseURL(%s): %v", url, err)
	}
	return opts
}
