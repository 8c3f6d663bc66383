package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// LockExpiredEarly is lock-expired-early: the product's lock key is deleted
// from Redis (the fleet's, and every Redlock server's) while a holder is
// inside its critical section, as if its lease had expired early (a clock
// jump, an eviction), three times in a row, each time under a new holder.
// Strategies that keep no lock key in Redis (seen within lookFor) are not
// applicable.
type LockExpiredEarly struct{}

// lookFor bounds how long Inject looks for a lock key before deciding the
// strategy keeps none.
const lookFor = time.Second

// deletions is how many holders lose their lock key in one run.
const deletions = 3

// Name implements Fault.
func (*LockExpiredEarly) Name() string { return "lock-expired-early" }

// Scope implements Scoped.
func (*LockExpiredEarly) Scope() Scope { return ScopeProduct }

// Inject implements Fault.
func (f *LockExpiredEarly) Inject(ctx context.Context, t Target) error {
	urls := []string{t.Fleet.RedisURL}
	for _, r := range t.Fleet.RedlockServers {
		urls = append(urls, r.URL)
	}
	var rdbs []*redis.Client
	for _, u := range urls {
		opts, err := redis.ParseURL(u)
		if err != nil {
			return fmt.Errorf("lock-expired-early: %w", err)
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		rdbs = append(rdbs, rdb)
	}
	var deleted []string // the holders' values, so each deletion hits a new holder
	for len(deleted) < deletions {
		wctx, cancel := context.WithTimeout(ctx, lookFor)
		var key, val string
		err := waitFor(wctx, t, "a lock key of "+t.Product, func(ctx context.Context) (bool, error) {
			for _, rdb := range rdbs {
				var err error
				if key, val, err = lockKey(ctx, rdb, t.Product); err != nil || key != "" {
					if err != nil {
						return false, err
					}
					break
				}
			}
			if key == "" {
				return false, nil
			}
			for _, d := range deleted {
				if d == val {
					return false, nil
				}
			}
			return true, nil
		})
		cancel()
		switch {
		case (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrMissed)) && ctx.Err() == nil && len(deleted) == 0:
			return fmt.Errorf("no lock key of %s in Redis for %v or until the buyers finished: %w", t.Product, lookFor, ErrNotApplicable)
		case len(deleted) > 0 && err != nil && ctx.Err() == nil:
			return nil // the buyers are done, or no new holder came: the holders seen lost their keys
		case err != nil:
			return err
		}
		// Only the holder's own key, so a new holder's is left alone; on
		// every server that has it (a Redlock holder's is on a majority).
		for _, rdb := range rdbs {
			if err := deleteHolder.Run(ctx, rdb, []string{key}, val).Err(); err != nil {
				return fmt.Errorf("delete %s on %s: %w", key, rdb.Options().Addr, err)
			}
		}
		deleted = append(deleted, val)
	}
	return nil
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

// lockKey finds the product's lock key in Redis, "lock:{id}" or any key
// starting with "lock" and carrying the product's hash tag, except the
// fencing counters (":fence", ":fair:fence", ":redlock-fence"), and returns
// it with its holder: a string's value, or a hash's first field. It
// returns "" when there is none.
func lockKey(ctx context.Context, rdb *redis.Client, product string) (key, val string, err error) {
	iter := rdb.Scan(ctx, 0, "*{"+product+"}*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !strings.HasPrefix(k, "lock") || strings.HasSuffix(k, "fence") {
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

// Heal implements Fault: the holders notice on their own (a failed renewal,
// a refused fence); nothing to restore.
func (*LockExpiredEarly) Heal(context.Context) error { return nil }
