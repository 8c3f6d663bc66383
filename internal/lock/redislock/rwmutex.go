package redislock

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
)

// ReadBackend is the Fence.Backend of a read lease: its token is the newest
// writer's fence when the reader entered (0: no writer yet), shared by
// every reader of that time, not a counter of readers.
const ReadBackend = "redislock/read"

var (
	//go:embed rw_expire.lua
	rwExpireSrc string
	//go:embed rw_read_acquire.lua
	rwReadAcquireSrc string
	//go:embed rw_read_renew.lua
	rwReadRenewSrc string
	//go:embed rw_read_release.lua
	rwReadReleaseSrc string
	//go:embed rw_write_acquire.lua
	rwWriteAcquireSrc string
	//go:embed rw_write_withdraw.lua
	rwWriteWithdrawSrc string

	// Every read-write script starts by dropping expired readers and
	// waiting writers (rw_expire.lua).
	rwReadAcquire   = redis.NewScript(rwExpireSrc + rwReadAcquireSrc)
	rwReadRenew     = redis.NewScript(rwExpireSrc + rwReadRenewSrc)
	rwReadRelease   = redis.NewScript(rwExpireSrc + rwReadReleaseSrc)
	rwWriteAcquire  = redis.NewScript(redisscript.WithFence(rwExpireSrc + rwWriteAcquireSrc))
	rwWriteWithdraw = redis.NewScript(rwWriteWithdrawSrc)
)

// RWMutex is a read-write Redis lock (seed 002's question): readers share
// it, a writer excludes readers and other writers, and writers are not
// starved, since no new reader enters while a writer waits. Each reader and
// writer holds a lease of Options.TTL (renewed by the watchdog when
// Options.Watchdog is set): a holder that dies frees its place by the TTL,
// a waiting writer that dies stops keeping readers out by the TTL.
//
// The write side is a lock.Locker over the same key and fencing counter as
// a Mutex (they exclude each other, and a writer's fence is above every
// earlier holder's); RLocker is the read side. Create one per process and
// share it; it is safe for concurrent use.
type RWMutex struct{ base }

// NewRWMutex returns an RWMutex over rdb; see Options for the defaults.
func NewRWMutex(rdb redis.UniversalClient, opts Options) *RWMutex {
	return &RWMutex{newBase(rdb, opts)}
}

// Close stops the subscription that wakes waiters (see Mutex.Close).
func (m *RWMutex) Close() { m.close() }

// Lock takes the write side of key, waiting (at most Options.Wait, never
// past ctx) while readers or another writer hold it.
func (m *RWMutex) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, m.opts.Observer, key, "lock", true, m.write)
}

// TryLock makes one attempt at the write side and never waits.
func (m *RWMutex) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, m.opts.Observer, key, "trylock", false, m.write)
}

// RLocker returns the read side: its Lock waits while a writer holds key or
// waits for it; any number of readers hold it at once.
func (m *RWMutex) RLocker() lock.Locker { return reader{m} }

type reader struct{ m *RWMutex }

func (r reader) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, r.m.opts.Observer, key, "rlock", true, r.m.read)
}

func (r reader) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, r.m.opts.Observer, key, "tryrlock", false, r.m.read)
}

// rwKeys are the read-write scripts' keys for key, all in its Redis Cluster
// slot, and its release channel.
func rwKeys(op, key string) ([]string, string, error) {
	fk, err := fenceKey(key)
	if err == nil {
		var rk, wk, ch string
		if rk, err = companion(key, "readers"); err == nil {
			if wk, err = companion(key, "writers"); err == nil {
				if ch, err = releaseChannel(key); err == nil {
					return []string{key, fk, rk, wk}, ch, nil
				}
			}
		}
	}
	return nil, "", &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
}

// side is what differs between taking the read and the write side.
type side struct {
	backend string        // the lease's Fence.Backend
	acquire *redis.Script // one try
	renew   *redis.Script // the watchdog's renewal: keys[:renewKeys]
	// release frees the hold (keys[:releaseKeys]); withdraw, if set, runs
	// after a wait that gave up.
	release, withdraw      *redis.Script
	renewKeys, releaseKeys int
}

var (
	writeSide = side{backend: Backend, acquire: rwWriteAcquire, renew: mutexRenew, renewKeys: 1,
		release: mutexRelease, releaseKeys: 2, withdraw: rwWriteWithdraw}
	readSide = side{backend: ReadBackend, acquire: rwReadAcquire, renew: rwReadRenew, renewKeys: 4,
		release: rwReadRelease, releaseKeys: 4}
)

func (m *RWMutex) write(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	return m.take(ctx, writeSide, key, op, wait, trips)
}

func (m *RWMutex) read(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	return m.take(ctx, readSide, key, op, wait, trips)
}

// take acquires one side of key: the same waiting, leases and release as a
// Mutex, with that side's scripts.
func (m *RWMutex) take(ctx context.Context, sd side, key, op string, wait bool, trips *int) (*Lease, error) {
	keys, ch, err := rwKeys(op, key)
	if err != nil {
		return nil, err
	}
	token := newToken()
	var renew func(context.Context) (bool, error)
	if m.opts.Watchdog {
		renew = func(ctx context.Context) (bool, error) {
			v, _, err := redisscript.Run(ctx, m.rdb, sd.renew, keys[:sd.renewKeys], token, ms(m.opts.TTL))
			return v == int64(1), err
		}
	}
	h := newHold(sd.backend, key, token, &m.opts, renew)
	fence, sent, err := grant(ctx, &m.opts, op, key, wait, trips, m.notify, m.cleanups, ch,
		func(ctx context.Context, floor string) (any, int, error) {
			return redisscript.Run(ctx, m.rdb, sd.acquire, keys, token, ms(m.opts.TTL), floor)
		},
		func(ctx context.Context) {
			_, _, _ = redisscript.Run(ctx, m.rdb, sd.release, keys[:sd.releaseKeys], token, ch)
		})
	if err != nil {
		if sd.withdraw != nil {
			// Waiting no more: stop keeping readers out now, not at the TTL.
			wctx, cancel := releaseContext(ctx)
			_, _, _ = redisscript.Run(wctx, m.rdb, sd.withdraw, keys, token, ch)
			cancel()
		}
		return nil, err
	}
	h.arm(sent, fence)
	return h.addLease(ctx, func(ctx context.Context, l *Lease) error {
		return m.release(ctx, l, sd.release, keys[:sd.releaseKeys], token, ch)
	}), nil
}

var _ lock.Locker = (*RWMutex)(nil)
