// Package redisbreak is redislock's Breaker (package breaker): it finds a
// product's lock in the service's Redis and deletes it under its holder,
// only if the holder still holds it. redlock's breaker reads its servers
// the same way (LockKey, Take).
package redisbreak

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock/breaker"
)

// Breaker is redislock's: the locks of the plain, reentrant, fair and
// setnx kinds, in the service's own Redis.
var Breaker = breaker.Breaker{
	Backend: "redislock",
	Where:   "Redis",
	Open: func(_ context.Context, s breaker.Servers) (breaker.Locks, bool, error) {
		if s.Redis == "" {
			return nil, false, nil
		}
		rdb, err := Client(s.Redis)
		if err != nil {
			return nil, false, err
		}
		return Locks{rdb}, true, nil
	},
}

// Client is a client of the Redis at url.
func Client(url string) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}

// Locks are the lock keys on some Redis servers: a holder's key is taken
// on every one that has it (a Redlock holder's is on a majority).
type Locks []*redis.Client

// Close closes the clients.
func (l Locks) Close() {
	for _, rdb := range l {
		_ = rdb.Close()
	}
}

// Holder implements breaker.Locks.
func (l Locks) Holder(ctx context.Context, name string) (breaker.Holder, bool, error) {
	for _, rdb := range l {
		key, val, err := LockKey(ctx, rdb, name)
		if err != nil {
			return breaker.Holder{}, false, err
		}
		if key == "" {
			continue
		}
		return breaker.Holder{ID: val, Take: func(ctx context.Context) (bool, error) { return Take(ctx, l, key, val) }}, true, nil
	}
	return breaker.Holder{}, false, nil
}

// Take deletes key on every server of rdbs where val still holds it, and
// reports whether it did anywhere. Only the holder's own key goes, so a
// new holder's is left alone.
func Take(ctx context.Context, rdbs []*redis.Client, key, val string) (bool, error) {
	taken := false
	for _, rdb := range rdbs {
		n, err := deleteHolder.Run(ctx, rdb, []string{key}, val).Int()
		if err != nil {
			return taken, fmt.Errorf("delete %s on %s: %w", key, rdb.Options().Addr, err)
		}
		taken = taken || n > 0
	}
	return taken, nil
}

// deleteHolder deletes KEYS[1] if it is still held by ARGV[1]: the value of
// a string lock, or a field (the owner) of a hash lock.
var deleteHolder = redis.NewScript(`
local t = redis.call("TYPE", KEYS[1]).ok
if (t == "string" and redis.call("GET", KEYS[1]) == ARGV[1])
	or (t == "hash" and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1) then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// LockKey finds the lock named name (lock:{id}) in rdb: "lock:{id}" or
// any key starting with "lock" and carrying its hash tag, except the
// fencing counters (":fence", ":fair:fence", ":redlock-fence"), or
// setnx's "setnx:{id}", and returns it with its holder: a string's value,
// or a hash's first field. It returns "" when there is none. (setnx's value
// is always 1, so its holders look alike: one of them loses its lock per
// take.)
func LockKey(ctx context.Context, rdb *redis.Client, name string) (key, val string, err error) {
	iter := rdb.Scan(ctx, 0, "*"+hashTag(name)+"*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !(strings.HasPrefix(k, "lock") || strings.HasPrefix(k, "setnx:")) || strings.HasSuffix(k, "fence") {
			continue
		}
		switch typ, err := rdb.Type(ctx, k).Result(); {
		case err != nil:
			return "", "", err
		case typ == "string":
			v, err := rdb.Get(ctx, k).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			return k, v, err
		case typ == "hash":
			fields, err := rdb.HKeys(ctx, k).Result()
			if err != nil || len(fields) == 0 {
				continue
			}
			return k, fields[0], nil
		}
	}
	return "", "", iter.Err()
}

// hashTag is name's Redis hash tag, "{id}" of "lock:{id}", which every key
// of the lock carries; name itself when it has none.
func hashTag(name string) string {
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return name
	}
	j := strings.IndexByte(name[i:], '}')
	if j < 0 {
		return name
	}
	return name[i : i+j+1]
}
