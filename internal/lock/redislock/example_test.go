package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/redislock"
)

// A sale under a Mutex: the work runs under the lease's context, so a lost
// lock cancels it, and the fence goes to the storage, which refuses a fence
// lower than the highest it has seen. (Compiled, not run: it needs a Redis.)
func ExampleMutex_Lock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	m := redislock.NewMutex(rdb, redislock.Options{Options: lock.Options{TTL: 10 * time.Second, Wait: 2 * time.Second}})
	defer m.Close() // stops the subscription that wakes waiters (it also stops when idle)

	ctx := context.Background()
	lease, err := m.Lock(ctx, "lock:{sku-1}")
	if errors.Is(err, lock.ErrTimeout) {
		fmt.Println("busy, try later") // e.g. 503 with Retry-After
		return
	} else if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	sell := func(ctx context.Context, fence int64) error { return ctx.Err() } // a Postgres transaction
	if err := sell(lease.Context(), lease.Fence().Token); err != nil {
		fmt.Println("rolled back:", context.Cause(lease.Context()))
	}
}

// Nested code of one request re-enters the lock its caller holds.
func ExampleReentrant_Lock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	r := redislock.NewReentrant(rdb, redislock.Options{MaxHold: time.Minute})
	defer r.Close()

	ctx := lock.WithOwner(context.Background(), "request-42")
	outer, err := r.Lock(ctx, "lock:{sku-1}")
	if err != nil {
		return
	}
	defer outer.Release(ctx)
	inner, err := r.Lock(ctx, "lock:{sku-1}") // same owner: count 2, same fence
	if err != nil {
		return
	}
	fmt.Println(inner.Fence().Token == outer.Fence().Token)
	_ = inner.Release(ctx) // count 1: still held
}
