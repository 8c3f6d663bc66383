package productcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/inventory"
	"inventory/internal/lock"
)

// Mode is how anonymous reads use the cache (INVENTORY_PRODUCT_CACHE).
type Mode string

const (
	// Lock is the cache that cannot stampede: entries refreshed ahead of
	// their expiry under a refresh lock, concurrent reads of a replica
	// sharing one lookup (see the package doc).
	Lock Mode = "lock"
	// NoLock is the naive cache-aside, to show the stampede: every reader
	// that finds no entry reads Postgres and writes one. Not for
	// production.
	NoLock Mode = "nolock"
	// Off reads Postgres every time.
	Off Mode = "off"
)

// ParseMode is the Mode named s.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Lock, NoLock, Off:
		return m, nil
	}
	return "", fmt.Errorf("unknown product cache mode %q (want lock, nolock or off)", s)
}

// MinTTL and MaxTTL bound Options.TTL: below MinTTL an entry would not
// outlive the Postgres read that made it; above MaxTTL it is no longer a
// bound a buyer looking at the stock would accept.
const (
	MinTTL = 10 * time.Millisecond
	MaxTTL = 10 * time.Second
)

// Source is where an answer came from: the label source of
// inventory_product_reads_total.
type Source string

const (
	// SourceCache: the shared entry, in the first half of its life (or
	// the entry another replica's refresh wrote while this one waited).
	SourceCache Source = "cache"
	// SourceStale: the shared entry in the second half of its life, while
	// another reader refreshed it; still within the bound.
	SourceStale Source = "stale"
	// SourceJoined: the result of a lookup another read of this replica
	// was already making, shared.
	SourceJoined Source = "joined"
	// SourcePostgres: a Postgres read of its own (a refresh, a fallback,
	// an exact read). Their count is the Postgres reads the product page
	// costs.
	SourcePostgres Source = "postgres"
)

// Reasons for a Postgres read the cache could not spare (Observer.FellBack).
const (
	// FallbackRedis: Redis failed (a lookup, or the refresh lock).
	FallbackRedis = "redis"
	// FallbackWait: another reader held the refresh lock, and its entry
	// did not come within Options.Wait.
	FallbackWait = "wait"
)

// Results of a try of a refresh lock (Observer.Locked).
const (
	LockAcquired = "acquired"
	LockHeld     = "held"
	LockError    = "error"
)

// Loader reads a product from Postgres (postgres.Store.Product): a product
// that does not exist is an error wrapping inventory.ErrNotFound.
type Loader func(ctx context.Context, id string) (inventory.Product, error)

// Observer receives the cache's events, for metrics. Implementations must
// be safe for concurrent use and must not block.
type Observer interface {
	// Answered reports one answer (a product, or that there is none), by
	// where it came from; a read that failed is not reported.
	Answered(source Source)
	// FellBack reports a Postgres read made because the cache could not
	// answer: FallbackRedis or FallbackWait.
	FellBack(reason string)
	// Waited reports a wait for another reader's refresh: how long, and
	// whether the entry came (else the wait ran out or Redis failed).
	Waited(d time.Duration, filled bool)
	// Locked reports a try of a refresh lock: LockAcquired, LockHeld or
	// LockError.
	Locked(result string)
}

// Options configures a Cache. The zero value works but for Locker, which
// Lock mode requires.
type Options struct {
	// Mode is how reads use the cache; default Lock.
	Mode Mode
	// TTL is the staleness bound: no answer shows the product as it was
	// longer ago than this (an entry's life, counted from before the
	// Postgres read that made it). An entry is refreshed once it is half
	// as old. Between MinTTL and MaxTTL; default 1s.
	TTL time.Duration
	// Wait bounds how long a read that found no entry waits for another
	// reader's refresh before it reads Postgres itself; default TTL/4.
	Wait time.Duration
	// Locker takes the refresh locks, by TryLock only (nobody waits on
	// the lock itself), with a lease of about TTL so that a refresher
	// that died holds nobody up for long. Required in Lock mode.
	Locker lock.Locker
	// RedisTimeout bounds each Redis command: a Redis that hangs costs a
	// read this much before it goes to Postgres; default 250ms.
	RedisTimeout time.Duration
	// Observer receives events for metrics; nil: none.
	Observer Observer
	// Logger gets a warning when Redis fails (one every warnEvery at
	// most; the rest are only counted); nil: slog.Default().
	Logger *slog.Logger
}

// warnEvery is the most often the cache logs a Redis failure: with Redis
// down every read would log one.
const warnEvery = 10 * time.Second

// redisRest is how long reads skip Redis after it failed them: without
// it every read of a Redis that is down would first wait for it (go-redis
// retries a refused connection with backoff, until RedisTimeout).
const redisRest = time.Second

// errRedisResting: Redis failed a read less than redisRest ago.
var errRedisResting = errors.New("redis failed a moment ago: not asked again yet")

// lookupTimeout bounds a lookup on top of its wait (Options.Wait), since
// its result is shared and outlives the request that started it.
const lookupTimeout = 5 * time.Second

// Cache is the product read through the shared cache. It is safe for
// concurrent use; make one per process.
type Cache struct {
	rdb      redis.UniversalClient
	load     Loader
	opts     Options
	obs      Observer
	log      *slog.Logger
	flights  flights
	lastWarn atomic.Int64 // unix ns of the last warning
	// restUntil is when reads may ask Redis again after a failure (unix ns).
	restUntil atomic.Int64
}

// Read is one answer: the product (when it exists) and how old it is.
type Read struct {
	Product inventory.Product
	Source  Source
	// readAt is when the Postgres read that the answer shows began, on
	// this process's monotonic clock.
	readAt time.Time
}

// Age is how long ago the Postgres read this answer shows began: what
// the Age header says, in whole seconds.
func (r Read) Age() time.Duration { return max(0, time.Since(r.readAt)) }

// New returns a Cache that reads products with load and shares them
// through rdb.
func New(rdb redis.UniversalClient, load Loader, opts Options) (*Cache, error) {
	if opts.Mode == "" {
		opts.Mode = Lock
	}
	if _, err := ParseMode(string(opts.Mode)); err != nil {
		return nil, fmt.Errorf("productcache.New: %w", err)
	}
	if opts.TTL == 0 {
		opts.TTL = time.Second
	}
	switch {
	case load == nil:
		return nil, errors.New("productcache.New: a Loader is required")
	case opts.Mode != Off && rdb == nil:
		return nil, fmt.Errorf("productcache.New: mode %s needs a Redis client", opts.Mode)
	case opts.Mode == Lock && opts.Locker == nil:
		return nil, errors.New("productcache.New: mode lock needs a Locker")
	case opts.TTL < MinTTL || opts.TTL > MaxTTL:
		return nil, fmt.Errorf("productcache.New: TTL must be between %s and %s, got %s", MinTTL, MaxTTL, opts.TTL)
	case opts.Wait < 0 || opts.RedisTimeout < 0:
		return nil, fmt.Errorf("productcache.New: Wait and RedisTimeout must not be negative, got %s and %s", opts.Wait, opts.RedisTimeout)
	}
	if opts.Wait == 0 {
		opts.Wait = opts.TTL / 4
	}
	if opts.RedisTimeout == 0 {
		opts.RedisTimeout = 250 * time.Millisecond
	}
	c := &Cache{rdb: rdb, load: load, opts: opts, obs: opts.Observer, log: opts.Logger}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// Mode is the mode the cache runs in.
func (c *Cache) Mode() Mode { return c.opts.Mode }

// TTL is the staleness bound (Options.TTL).
func (c *Cache) TTL() time.Duration { return c.opts.TTL }

// Get reads product id through the cache: within the bound (Options.TTL),
// never failing because of Redis. A product that does not exist is an
// error wrapping inventory.ErrNotFound (cached like a product); a Postgres
// failure is the Loader's error.
func (c *Cache) Get(ctx context.Context, id string) (Read, error) {
	if err := inventory.ValidateProductID(id); err != nil {
		return Read{}, err
	}
	switch c.opts.Mode {
	case Off:
		return c.Exact(ctx, id)
	case NoLock:
		return c.answer(c.naive(ctx, id))
	}
	// A lookup joined began before this read did: its answer, within the
	// bound when the lookup began, can be past it for this read (a fleet
	// under load: 0.7 ms past). Such an answer is not this read's; the
	// next lookup, begun after this read, gives one within its bound.
	oldest := time.Now().Add(-c.opts.TTL)
	for range joinTries {
		f, leader := c.flights.join(id)
		if leader {
			return c.answer(c.lead(ctx, id, f))
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Read{}, fmt.Errorf("read product %q: %w", id, context.Cause(ctx))
		}
		r := f.read
		if f.err != nil && !errors.Is(f.err, inventory.ErrNotFound) || !r.readAt.Before(oldest) {
			r.Source = SourceJoined
			return c.answer(r, f.err)
		}
	}
	return c.Exact(ctx, id)
}

// joinTries is how many lookups a read joins, at most, before it reads
// Postgres itself: a lookup joined gave an answer past this read's bound
// only when it began before this read, and the next one begins after it.
const joinTries = 3

// Exact reads product id from Postgres, past the cache: an admin's read,
// a read with Cache-Control: no-cache.
func (c *Cache) Exact(ctx context.Context, id string) (Read, error) {
	if err := inventory.ValidateProductID(id); err != nil {
		return Read{}, err
	}
	readAt := time.Now()
	p, err := c.load(ctx, id)
	return c.answer(Read{Product: p, Source: SourcePostgres, readAt: readAt}, err)
}

// Drop deletes product id's entry after a restock committed round, and
// forbids entries of older rounds, so that every replica's next read shows
// the new round; this replica's reads that start after Drop returns do not
// join a lookup that started before it. Call it after the restock's
// commit. An error (Redis failing) leaves the old entry to expire within
// the bound.
func (c *Cache) Drop(ctx context.Context, id string, round int) error {
	if c.opts.Mode == Off {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RedisTimeout)
	defer cancel()
	err := drop(ctx, c.rdb, id, round)
	c.flights.forget(id)
	return err
}

// errNoAnswer: the lookup a read joined ended without an answer (it
// panicked).
var errNoAnswer = errors.New("the shared lookup of the product ended without an answer")

// lead makes lookup f of id for every read that joins it, and lands it
// whatever happens: a lookup that never landed would hold every later read
// of the product in this replica.
func (c *Cache) lead(ctx context.Context, id string, f *flight) (Read, error) {
	landed := false
	defer func() {
		if !landed {
			c.flights.land(id, f, Read{}, fmt.Errorf("read product %q: %w", id, errNoAnswer))
		}
	}()
	// Detached: the lookup's result is every joined reader's, so the
	// leader hanging up must not cut it short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Wait+lookupTimeout)
	defer cancel()
	r, err := c.lookup(ctx, id)
	landed = true
	c.flights.land(id, f, r, err)
	return r, err
}

// lookup is Get's work in Lock mode, shared by the replica's concurrent
// reads of id.
func (c *Cache) lookup(ctx context.Context, id string) (Read, error) {
	if c.resting() {
		return c.fallBack(ctx, id, FallbackRedis, errRedisResting)
	}
	e, found, err := c.fetch(ctx, id)
	if err != nil {
		return c.fallBack(ctx, id, FallbackRedis, err)
	}
	if found && e.age < c.opts.TTL/2 {
		return e.read(id, SourceCache)
	}
	// Due for a refresh, or missing: one reader in the fleet reads Postgres.
	lease, err := c.opts.Locker.TryLock(ctx, refreshKey(id))
	switch {
	case err == nil:
		c.obs.Locked(LockAcquired)
		defer c.release(ctx, id, lease)
		// Another replica may have refreshed it between our look and our
		// lock (and released the lock): look again before Postgres.
		if again, ok, ferr := c.fetch(ctx, id); ferr == nil && ok && again.age < c.opts.TTL/2 {
			return again.read(id, SourceCache)
		}
		r, err := c.refresh(ctx, id)
		if err != nil && found && !errors.Is(err, inventory.ErrNotFound) {
			// Postgres failed, but the entry is still within the bound.
			return e.read(id, SourceStale)
		}
		return r, err
	case found:
		// Another reader refreshes it (or the lock's backend failed: the
		// next reader tries again); meanwhile the entry is within the bound.
		c.lockFailed(ctx, id, err)
		return e.read(id, SourceStale)
	case errors.Is(err, lock.ErrNotAcquired):
		c.obs.Locked(LockHeld)
		e, found, err := c.await(ctx, id)
		if found {
			return e.read(id, SourceCache)
		}
		if err != nil {
			return c.fallBack(ctx, id, FallbackRedis, err)
		}
		// The refresher is slow or gone: read it ourselves, and share it.
		c.obs.FellBack(FallbackWait)
		return c.refresh(ctx, id)
	default:
		c.lockFailed(ctx, id, err)
		return c.fallBack(ctx, id, FallbackRedis, err)
	}
}

// naive is Get in NoLock mode: the cache-aside of every tutorial, which
// stampedes when an entry expires under a crowd.
func (c *Cache) naive(ctx context.Context, id string) (Read, error) {
	if c.resting() {
		return c.fallBack(ctx, id, FallbackRedis, errRedisResting)
	}
	e, found, err := c.fetch(ctx, id)
	if err != nil {
		return c.fallBack(ctx, id, FallbackRedis, err)
	}
	if found {
		return e.read(id, SourceCache)
	}
	return c.refresh(ctx, id)
}

// fetch reads id's entry, bounded by RedisTimeout: found only when it is
// younger than TTL (an entry written by a replica with a longer TTL can be
// older). An entry that does not parse is a miss, and is overwritten by
// the refresh that follows.
func (c *Cache) fetch(ctx context.Context, id string) (cached, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RedisTimeout)
	defer cancel()
	e, found, err := fetch(ctx, c.rdb, id)
	if errors.Is(err, errBadEntry) {
		c.warn(ctx, "product cache: an entry that is not one, read as a miss", id, err)
		return cached{}, false, nil
	}
	return e, found && e.age < c.opts.TTL, err
}

// await waits for another reader's refresh of id's entry, at most Wait.
// The lock holder is one per fleet and this waiter one per replica (the
// others joined its lookup), so polling costs Redis a few commands per
// replica; a notice would cost a subscription per product.
func (c *Cache) await(ctx context.Context, id string) (cached, bool, error) {
	start := time.Now()
	deadline := start.Add(c.opts.Wait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for pause := time.Millisecond; ; pause = min(2*pause, maxPoll) {
		left := time.Until(deadline)
		if left <= 0 {
			c.obs.Waited(time.Since(start), false)
			return cached{}, false, nil
		}
		if timer == nil {
			timer = time.NewTimer(min(pause, left))
		} else {
			timer.Reset(min(pause, left))
		}
		select {
		case <-ctx.Done():
			c.obs.Waited(time.Since(start), false)
			return cached{}, false, context.Cause(ctx)
		case <-timer.C:
		}
		e, found, err := c.fetch(ctx, id)
		if err != nil || found {
			c.obs.Waited(time.Since(start), found)
			return e, found, err
		}
	}
}

// maxPoll is the longest pause between two looks of a waiting reader.
const maxPoll = 16 * time.Millisecond

// refresh reads id from Postgres and writes its entry (that it does not
// exist, too), sharing the read with every replica. A write that fails
// costs nothing but the next reader's miss.
func (c *Cache) refresh(ctx context.Context, id string) (Read, error) {
	readAt := time.Now()
	p, err := c.load(ctx, id)
	missing := errors.Is(err, inventory.ErrNotFound)
	if err != nil && !missing {
		return Read{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, c.opts.RedisTimeout)
	defer cancel()
	if werr := store(sctx, c.rdb, id, p, missing, readAt, c.opts.TTL); werr != nil {
		c.warn(ctx, "product cache: the refreshed entry could not be written (the read is answered from Postgres)", id, werr)
	}
	return Read{Product: p, Source: SourcePostgres, readAt: readAt}, err
}

// fallBack reads id from Postgres because the cache could not answer
// (cause), without writing the entry (Redis is failing).
func (c *Cache) fallBack(ctx context.Context, id, reason string, cause error) (Read, error) {
	if reason == FallbackRedis && !errors.Is(cause, errRedisResting) {
		c.restUntil.Store(time.Now().Add(redisRest).UnixNano())
		c.warn(ctx, "product cache: Redis failed, reads go to Postgres", id, cause)
	}
	c.obs.FellBack(reason)
	readAt := time.Now()
	p, err := c.load(ctx, id)
	return Read{Product: p, Source: SourcePostgres, readAt: readAt}, err
}

// resting reports whether Redis failed a read less than redisRest ago.
func (c *Cache) resting() bool { return time.Now().UnixNano() < c.restUntil.Load() }

// release gives a refresh lock back; a release that fails leaves the lock
// to its lease time, which only delays the next refresh.
func (c *Cache) release(ctx context.Context, id string, lease lock.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.RedisTimeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil && !errors.Is(err, lock.ErrLost) {
		c.warn(ctx, "product cache: a refresh lock could not be released (it expires by itself)", id, err)
	}
}

// lockFailed counts a refresh lock not taken, warning when its backend failed.
func (c *Cache) lockFailed(ctx context.Context, id string, err error) {
	if errors.Is(err, lock.ErrNotAcquired) {
		c.obs.Locked(LockHeld)
		return
	}
	c.obs.Locked(LockError)
	c.warn(ctx, "product cache: the refresh lock failed", id, err)
}

// answer reports r, an answer, to the Observer unless err is a failure.
func (c *Cache) answer(r Read, err error) (Read, error) {
	if err == nil || errors.Is(err, inventory.ErrNotFound) {
		c.obs.Answered(r.Source)
	}
	return r, err
}

// warn logs err, unless another warning was logged within warnEvery.
func (c *Cache) warn(ctx context.Context, msg, id string, err error) {
	now := time.Now().UnixNano()
	last := c.lastWarn.Load()
	if now-last < int64(warnEvery) || !c.lastWarn.CompareAndSwap(last, now) {
		return
	}
	c.log.WarnContext(ctx, msg, "product_id", id, "err", err)
}

// read is the answer e gives for product id, from source.
func (e cached) read(id string, source Source) (Read, error) {
	r := Read{Product: e.product, Source: source, readAt: time.Now().Add(-e.age)}
	if e.missing {
		return r, fmt.Errorf("product %q: %w", id, inventory.ErrNotFound)
	}
	return r, nil
}

type nopObserver struct{}

func (nopObserver) Answered(Source)            {}
func (nopObserver) FellBack(string)            {}
func (nopObserver) Waited(time.Duration, bool) {}
func (nopObserver) Locked(string)              {}
