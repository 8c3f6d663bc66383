package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// refusals records, from a client's acquire scripts, the Lock calls that
// reached Redis while the key was held: each call's first ARGV (a Mutex's
// token, a Reentrant's owner) is new per call, so the distinct ones among
// the tries Redis refused are the contenders.
type refusals struct {
	sha string // the acquire script's

	mu         sync.Mutex
	contenders map[string]bool
	tries      int
}

func (r *refusals) hook() evalHook {
	return func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		args := cmd.Args() // evalsha, sha, numkeys, keys…, argv… (an EVAL, the script's first send, is followed by its EVALSHA)
		if cmd.Name() != "evalsha" || len(args) < 4 || fmt.Sprint(args[1]) != r.sha {
			return err
		}
		n, ok := args[2].(int)
		if !ok || len(args) <= 3+n {
			return err
		}
		if reply, ok := cmd.(*redis.Cmd).Val().([]any); ok && len(reply) > 0 && reply[0] == int64(0) {
			r.mu.Lock()
			r.tries++
			r.contenders[fmt.Sprint(args[3+n])] = true
			r.mu.Unlock()
		}
		return err
	}
}

func (r *refusals) count() (contenders, tries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.contenders), r.tries
}

// TestOneContenderPerProcess: 16 Lock calls of one process wait for a key
// another process holds. Only one of them at a time may reach Redis (the
// others wait their turn in memory): their tries cost Redis and the
// replica a round trip each and can only lose to one another. After the
// holder releases, all 16 get the lock in turn.
func TestOneContenderPerProcess(t *testing.T) {
	for _, kind := range []struct {
		name string
		sha  string
		new  func(rdb *redis.Client, o Options) lock.Locker
	}{
		{"Mutex", mutexAcquire.Hash(), func(rdb *redis.Client, o Options) lock.Locker { return closing(t, NewMutex(rdb, o)) }},
		{"Reentrant", reentrantAcquire.Hash(), func(rdb *redis.Client, o Options) lock.Locker {
			return ownerPerCall{closing(t, NewReentrant(rdb, o))}
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			url := sharedRedis(t)
			// Timed retries a minute away: only notices and turns hand the lock over.
			opts := Options{Options: lock.Options{Wait: time.Minute}, PollInterval: time.Minute}
			other := kind.new(client(t, url), opts)
			rec := &refusals{sha: kind.sha, contenders: map[string]bool{}}
			local := kind.new(client(t, url, rec.hook()), opts)
			const key, n = "lock:{one-contender}", 16
			ctx := context.Background()
			held, err := other.Lock(ctx, key)
			if err != nil {
				t.Fatalf("holder's Lock = %v", err)
			}
			var started, taken atomic.Int64
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					started.Add(1)
					l, err := local.Lock(ctx, key)
					if err != nil {
						errs <- fmt.Errorf("waiter %d: Lock = %w", i, err)
						return
					}
					taken.Add(1)
					if err := l.Release(ctx); err != nil {
						errs <- fmt.Errorf("waiter %d: Release = %w", i, err)
					}
				})
			}
			testenv.WaitFor(t, "every waiter to call Lock and one of them to be refused by Redis", 10*time.Second, func() bool {
				c, _ := rec.count()
				return started.Load() == n && c >= 1
			})
			if err := held.Release(ctx); err != nil {
				t.Fatalf("holder's Release = %v", err)
			}
			testenv.WaitFor(t, "every waiter to get the lock", 30*time.Second, func() bool { return taken.Load() == n })
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if c, tries := rec.count(); c > 1 {
				t.Errorf("%d of %d local Lock calls reached Redis while the key was held (%d refused tries); want 1: the others wait their turn in memory", c, n, tries)
			} else {
				t.Logf("%d local Lock call reached Redis while the key was held (%d refused tries)", c, tries)
			}
		})
	}
}

// TestTurnNotKeptByAGiveUp: a local Lock call that gives up while it waits
// for its turn (its Wait budget or its ctx ends) reports ErrTimeout with
// the context's error, and leaves no turn behind: the next Lock of the key
// in the process gets it as soon as the holder releases.
func TestTurnNotKeptByAGiveUp(t *testing.T) {
	url := sharedRedis(t)
	for _, kind := range []struct {
		name string
		new  func(o Options) lock.Locker
	}{
		{"Mutex", func(o Options) lock.Locker { return closing(t, NewMutex(client(t, url), o)) }},
		{"Reentrant", func(o Options) lock.Locker { return ownerPerCall{closing(t, NewReentrant(client(t, url), o))} }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			l := kind.new(Options{Options: lock.Options{Wait: 200 * time.Millisecond}, PollInterval: time.Minute})
			key := "lock:{turn-give-up-" + kind.name + "}"
			ctx := context.Background()
			held, err := l.Lock(ctx, key)
			if err != nil {
				t.Fatalf("holder's Lock = %v", err)
			}
			if got, err := l.Lock(ctx, key); got != nil || !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Lock behind a local holder, Wait 200ms = %v, %v; want ErrTimeout wrapping DeadlineExceeded", got, err)
			}
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if got, err := l.Lock(cctx, key); got != nil || !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Lock behind a local holder, ctx 50ms = %v, %v; want ErrTimeout wrapping DeadlineExceeded", got, err)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatalf("holder's Release = %v", err)
			}
			next, err := l.Lock(ctx, key)
			if err != nil {
				t.Fatalf("Lock after the holder released and the others gave up = %v, want a lease", err)
			}
			if err := next.Release(ctx); err != nil {
				t.Errorf("Release = %v", err)
			}
		})
	}
}
