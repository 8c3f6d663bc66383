package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
)

// SetNX is the seeds' first Redis lock, kept to show how a lock breaks: do
// not protect anything with it. It takes a key with SETNX, then gives it a
// TTL with a separate PEXPIRE (the seeds use EXPIRE, in seconds; PEXPIRE
// lets a demo use millisecond TTLs and changes nothing else), and Unlock is
// an unconditional DEL. What is wrong with it:
//
//   - The key carries no token. A holder whose critical section outlives
//     the TTL has lost the lock without knowing it (no watchdog, no
//     deadline, no lease context), the next buyer takes it, and the first
//     one's DEL then deletes the second's lock, letting a third in: with
//     the TTL shorter than the work, holders overlap on every sale.
//   - SETNX and PEXPIRE are two commands: a holder that dies between them
//     leaves a key with no TTL. The seeds' lock is then taken for good;
//     this one heals it (a waiter gives a key without a TTL one, with
//     PEXPIRE NX, which never touches a TTL already set), because a demo
//     of one way a lock breaks should not wedge on another.
//   - There is no fencing token, so the protected storage cannot tell a
//     stale holder from the current one.
//
// Mutex is the same lock done right: SET NX PX with a token in one
// command, compare-and-delete release, a fencing token and a lease whose
// context ends when the lock is lost.
type SetNX struct {
	rdb  redis.UniversalClient
	opts Options
}

// NewSetNX returns the naive lock over rdb. Of opts it uses TTL, Wait,
// MinBackoff, MaxBackoff and their defaults; nothing else.
func NewSetNX(rdb redis.UniversalClient, opts Options) *SetNX {
	return &SetNX{rdb: rdb, opts: opts.withDefaults()}
}

// Lock polls SETNX with jittered backoff until it sets key, for at most
// Options.Wait and never past ctx (then *lock.Error wrapping lock.ErrTimeout), and
// then sets the TTL. It returns the function that deletes key, whoever
// holds it by then.
func (s *SetNX) Lock(ctx context.Context, key string) (unlock func(context.Context) error, err error) {
	return s.acquire(ctx, key, "lock", true)
}

// Locker is s as a lock.Locker, for code that takes every lock through the
// contract. It keeps every flaw of s: a lease has no fence (Token 0), is
// never told of a loss (its Context ends only with the ctx it came from,
// or at Release), and its Release is the unconditional DEL. Its TryLock
// makes one SETNX: lock.ErrNotAcquired when key is set.
func (s *SetNX) Locker() lock.Locker { return setNXLocker{s} }

type setNXLocker struct{ s *SetNX }

func (l setNXLocker) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return l.lease(ctx, key, "lock", true)
}

func (l setNXLocker) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return l.lease(ctx, key, "trylock", false)
}

func (l setNXLocker) lease(ctx context.Context, key, op string, wait bool) (lock.Lease, error) {
	unlock, err := l.s.acquire(ctx, key, op, wait)
	if err != nil {
		return nil, err
	}
	lease := &setNXLease{unlock: unlock}
	lease.Init(ctx, lock.Grant{Backend: Backend, Key: key})
	return lease, nil
}

// setNXLease is a SetNX hold as a lock.Lease.
type setNXLease struct {
	lock.State
	unlock func(context.Context) error
}

func (l *setNXLease) Release(ctx context.Context) error {
	if _, err := l.BeginRelease(); err != nil {
		return err
	}
	return l.EndRelease(l.unlock(ctx))
}

// acquire is Lock, or with wait false TryLock: one SETNX, and
// lock.ErrNotAcquired when key is set. op names the call in errors.
func (s *SetNX) acquire(ctx context.Context, key, op string, wait bool) (unlock func(context.Context) error, err error) {
	wctx, cancel := context.WithTimeout(ctx, s.opts.Wait)
	defer cancel()
	bo := newBackoff(s.opts.MinBackoff, s.opts.MaxBackoff)
	// Detached and short: what gives a key its TTL must run even when the
	// wait has just run out.
	detached := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	}
	unlock = func(ctx context.Context) error {
		if err := s.rdb.Del(ctx, key).Err(); err != nil {
			return &lock.Error{Backend: Backend, Op: "release", Key: key, Err: err}
		}
		return nil
	}
	for {
		ok, err := s.rdb.SetNX(wctx, key, 1, 0).Result()
		if ok {
			// The key is ours, even if the wait ran out meanwhile: it gets
			// its TTL first.
			ectx, cancel := detached()
			err := s.rdb.PExpire(ectx, key, s.opts.TTL).Err()
			cancel()
			if err != nil {
				return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
			}
			if wctx.Err() != nil {
				dctx, cancel := detached()
				_ = unlock(dctx)
				cancel()
				return nil, timeoutError(op, key, wctx)
			}
			return unlock, nil
		}
		// Held, or the answer lost (the SETNX may have landed): a key left
		// without a TTL gets one, a TTL already set is left alone.
		ectx, cancel := detached()
		_ = s.rdb.Do(ectx, "PEXPIRE", key, s.opts.TTL.Milliseconds(), "NX").Err()
		cancel()
		switch {
		case wctx.Err() != nil:
			return nil, timeoutError(op, key, wctx)
		case err != nil:
			return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
		case !wait:
			return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: lock.ErrNotAcquired}
		}
		t := time.NewTimer(bo.next())
		if !sleep(wctx, t) {
			return nil, timeoutError(op, key, wctx)
		}
	}
}
