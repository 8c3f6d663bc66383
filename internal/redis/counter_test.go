package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newRedis is a client of the binary's Redis, flushed for the test.
func newRedis(t *testing.T) goredis.UniversalClient {
	t.Helper()
	opts, err := goredis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestLuaScriptsIdempotent re-sends the reserve and give-back scripts, as
// go-redis does after a lost reply: each must act once.
func TestLuaScriptsIdempotent(t *testing.T) {
	rdb := newRedis(t)
	c := NewCounter(rdb)
	ctx := context.Background()
	const id = "scripts"
	key := CounterKey(id)
	if err := rdb.HSet(ctx, key, "r", 1, "g", 1, "n", 10).Err(); err != nil {
		t.Fatalf("HSET %s r 1 g 1 n 10: %v", key, err)
	}
	counter := func() int64 { n, _ := rdb.HGet(ctx, key, "n").Int64(); return n }
	reserveLeft := func(o inventory.Order, res string) (int64, int64, error) {
		status, r, err := c.Reserve(ctx, o, res, time.Minute)
		return int64(status), r.UnitsLeftNow, err
	}
	keyed := func(n int64) inventory.Order {
		return inventory.Order{ProductID: id, Quantity: n, IdempotencyKey: "order-7"}
	}

	steps := []struct {
		call                 string
		do                   func() (status, left int64, err error)
		wantStatus, wantLeft int64
		wantCounter          int64
	}{
		{"reserve(3, r1)", func() (int64, int64, error) { return reserveLeft(inventory.Order{ProductID: id, Quantity: 3}, "r1") }, int64(Reserved), 7, 7},
		{"reserve(3, r1) re-sent", func() (int64, int64, error) { return reserveLeft(inventory.Order{ProductID: id, Quantity: 3}, "r1") }, int64(Reserved), 7, 7},
		{"reserve(8, r2)", func() (int64, int64, error) { return reserveLeft(inventory.Order{ProductID: id, Quantity: 8}, "r2") }, int64(TooFew), 7, 7},
		{"giveBack(3, r1)", func() (int64, int64, error) {
			return 0, 0, c.GiveBack(ctx, inventory.Order{ProductID: id, Quantity: 3}, "r1")
		}, 0, 0, 10},
		{"giveBack(3, r1) re-sent", func() (int64, int64, error) {
			return 0, 0, c.GiveBack(ctx, inventory.Order{ProductID: id, Quantity: 3}, "r1")
		}, 0, 0, 10},
		{"reserve(3, r1) arriving after its give-back", func() (int64, int64, error) { return reserveLeft(inventory.Order{ProductID: id, Quantity: 3}, "r1") }, int64(Returned), 0, 10},
		{"giveBack(2, r3) of a reserve never run", func() (int64, int64, error) {
			return 0, 0, c.GiveBack(ctx, inventory.Order{ProductID: id, Quantity: 2}, "r3")
		}, 0, 0, 10},
		{"reserve(2, r3) arriving after that", func() (int64, int64, error) { return reserveLeft(inventory.Order{ProductID: id, Quantity: 2}, "r3") }, int64(Returned), 0, 10},
		{"reserve(2, k1) keyed", func() (int64, int64, error) { return reserveLeft(keyed(2), "k1") }, int64(Reserved), 8, 8},
		{"reserve(2, k2), a twin of k1", func() (int64, int64, error) { return reserveLeft(keyed(2), "k2") }, int64(TwinInFlight), 0, 8},
		{"reserve(2, k1) keyed, re-sent", func() (int64, int64, error) { return reserveLeft(keyed(2), "k1") }, int64(Reserved), 8, 8},
		{"giveBack(2, k1) clears the marker", func() (int64, int64, error) { return 0, 0, c.GiveBack(ctx, keyed(2), "k1") }, 0, 0, 10},
		{"reserve(2, k2) after its twin gave back", func() (int64, int64, error) { return reserveLeft(keyed(2), "k2") }, int64(Reserved), 8, 8},
		{"giveBack(2, k2)", func() (int64, int64, error) { return 0, 0, c.GiveBack(ctx, keyed(2), "k2") }, 0, 0, 10},
		{"reserve(1, r4) of a missing counter", func() (int64, int64, error) {
			rdb.Del(ctx, key)
			return reserveLeft(inventory.Order{ProductID: id, Quantity: 1}, "r4")
		}, int64(Missing), 0, 0},
	}
	for _, st := range steps {
		status, left, err := st.do()
		if err != nil || status != st.wantStatus || left != st.wantLeft {
			t.Errorf("%s = status %d, left %d, %v; want %d, %d, nil", st.call, status, left, err, st.wantStatus, st.wantLeft)
		}
		if got := counter(); got != st.wantCounter {
			t.Errorf("after %s: counter %d, want %d", st.call, got, st.wantCounter)
		}
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after reserving from a missing counter = %d, %v; want 0 (no negative key created)", key, n, err)
	}
}
