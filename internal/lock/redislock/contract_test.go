package redislock

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/locktest"
)

// TestContract runs the suite every backend passes on each kind of lock,
// each Locker with a client of its own ("a process"). A lease is lost by
// deleting its holder key: a watchdog notices within TTL/3, a Mutex
// without one at its validity deadline.
func TestContract(t *testing.T) {
	url := sharedRedis(t)
	admin := client(t, url)
	del := func(name func(key string) string) func(*testing.T, lock.Lease) {
		return func(t *testing.T, l lock.Lease) {
			if err := admin.Del(t.Context(), name(l.Key())).Err(); err != nil {
				t.Fatalf("DEL %s: %v", name(l.Key()), err)
			}
		}
	}
	same := func(key string) string { return key }
	fairHolder := func(key string) string {
		k, err := fairKeysFor(key)
		if err != nil {
			t.Fatalf("fairKeysFor(%q): %v", key, err)
		}
		return k.keys[0]
	}
	kinds := []struct {
		name string
		new  func(t *testing.T, rdb *redis.Client, o Options) lock.Locker
		lose func(*testing.T, lock.Lease)
	}{
		{"Mutex", func(t *testing.T, rdb *redis.Client, o Options) lock.Locker { return closing(t, NewMutex(rdb, o)) }, del(same)},
		{"Mutex+Watchdog", func(t *testing.T, rdb *redis.Client, o Options) lock.Locker {
			o.Watchdog = true
			return closing(t, NewMutex(rdb, o))
		}, del(same)},
		{"Reentrant", func(t *testing.T, rdb *redis.Client, o Options) lock.Locker {
			return ownerPerCall{closing(t, NewReentrant(rdb, o))}
		}, del(same)},
		{"Fair+Watchdog", func(t *testing.T, rdb *redis.Client, o Options) lock.Locker {
			o.Watchdog = true
			return closing(t, NewFair(rdb, o))
		}, del(fairHolder)},
		// The write side of a read-write lock is an exclusive lock like any.
		{"RWMutex+Watchdog", func(t *testing.T, rdb *redis.Client, o Options) lock.Locker {
			o.Watchdog = true
			return closing(t, NewRWMutex(rdb, o))
		}, del(same)},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			locktest.Run(t, locktest.Config{
				New: func(t *testing.T, o lock.Options) lock.Locker {
					return k.new(t, client(t, url), Options{Options: o})
				},
				Lose: k.lose,
			})
		})
	}
}

// ownerPerCall is a Reentrant lock whose every Lock and TryLock is a new
// owner (as each request is in internal/stock), so that its callers
// contend instead of re-entering.
type ownerPerCall struct{ *Reentrant }

func (r ownerPerCall) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return r.Reentrant.Lock(lock.WithOwner(ctx, newToken()), key)
}

func (r ownerPerCall) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return r.Reentrant.TryLock(lock.WithOwner(ctx, newToken()), key)
}
