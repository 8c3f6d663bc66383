package redlock

import (
	"context"
	crand "crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures a Locker. The zero value works.
type Options struct {
	// TTL is the lease time set on each server's key; default 30s. Nothing
	// renews it: a lease's validity is TTL less the time its round took and
	// the drift allowance (TTL/100 + 2ms).
	TTL time.Duration
	// Wait bounds how long Lock keeps trying, on top of ctx; default 10s.
	Wait time.Duration
	// ServerTimeout bounds each command to one server, so that a hung
	// server costs a round at most this; default TTL/20, at least 5ms (or
	// TTL/2 when that is less) and at most 1s.
	ServerTimeout time.Duration
	// MinBackoff and MaxBackoff bound the random delay between rounds: the
	// n-th is uniform in [MinBackoff, min(MaxBackoff, MinBackoff·2ⁿ)];
	// defaults 1ms and 32ms.
	MinBackoff, MaxBackoff time.Duration
	// FenceFloor, when set, is asked for the highest fencing token the
	// protected storage has seen for key, only when a server has no
	// fencing counter for it (first use, or the server lost its data), so
	// that the counter restarts above it. Without it a lost counter
	// restarts at 0.
	FenceFloor func(ctx context.Context, key string) (int64, error)
	// Observer receives events for metrics; nil means none.
	Observer Observer
}

// Observer receives lock events, e.g. to export metrics. Implementations must
// be safe for concurrent use and must not block. (Its methods are a subset
// of the Redis lock package's Observer, so one value can serve both.)
type Observer interface {
	// Acquired reports one Lock or TryLock call: nil on success, else the
	// error returned; how long it waited; the commands it sent, over all
	// servers (acquires, fence catch-ups and clean-up deletes).
	Acquired(key string, err error, wait time.Duration, roundTrips int)
	// Lost reports a lease lost while held (its validity ended).
	Lost(key string, reason error)
	// Released reports a release and how long the lock was held.
	Released(key string, held time.Duration, err error)
}

// Errors returned by this package, wrapped in *Error; match them with
// errors.Is. They mean what the Redis lock package's errors of the same
// names mean.
var (
	// ErrNotAcquired: no majority granted the lock, some server refused
	// because someone else holds it (TryLock; Lock's last try).
	ErrNotAcquired = errors.New("lock held by someone else")
	// ErrNoQuorum: too few servers answered for a majority; it comes
	// joined with their errors.
	ErrNoQuorum = errors.New("no majority of the servers answered")
	// ErrTooSlow: a majority granted, but after the validity was used up.
	ErrTooSlow = errors.New("majority granted after the validity was used up")
	// ErrTimeout: Lock gave up; it also wraps ctx.Err() (or
	// context.DeadlineExceeded for the Wait budget) and the last try's error.
	ErrTimeout = errors.New("timed out waiting for lock")
	// ErrLost: the lease is presumed lost; it comes with ErrExpired.
	ErrLost = errors.New("lock lost")
	// ErrExpired: the lease's validity ended.
	ErrExpired = errors.New("lease validity ended")
	// ErrNotHeld: a release found the key ours on fewer than a majority of
	// the servers (taken over, lost with a server, or already released).
	ErrNotHeld = errors.New("lock not held by this owner")
	// ErrReleaseUnknown: some servers did not answer the release, and too
	// few confirmed it; the keys expire by their TTL at the latest.
	ErrReleaseUnknown = errors.New("lock release outcome unknown")
	// ErrReleased: the cause of a lease context cancelled by Release.
	ErrReleased = errors.New("lock released")
	// ErrInvalidKey: the key cannot be given a fencing counter in its
	// Redis Cluster slot (empty, or no hash tag and a '}').
	ErrInvalidKey = errors.New("invalid lock key")
	// ErrNoServers: the Locker was built without servers.
	ErrNoServers = errors.New("no servers")
)

// Error carries the operation and key that an error is about.
type Error struct {
	Op  string // "lock", "trylock", "release"
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("redlock: %s %s: %v", e.Op, e.Key, e.Err) }

// Unwrap lets errors.Is see the sentinel (and ctx.Err() for timeouts).
func (e *Error) Unwrap() error { return e.Err }

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed catchup.lua
	catchupSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	catchupScript = redis.NewScript(catchupSrc)
	releaseScript = redis.NewScript(releaseSrc)

	errUnexpectedReply = errors.New("unexpected script reply")
)

// Locker takes and releases locks on a majority of its servers. Create one
// per process and share it; it is safe for concurrent use.
type Locker struct {
	servers []redis.UniversalClient
	quorum  int
	opts    Options
}

// New returns a Locker over servers, which must be independent Redis
// servers (not replicas of one another); at least 3 for Redlock to mean
// anything, an odd number to make best use of them. See Options for the
// defaults, and the package doc for the clients' ContextTimeoutEnabled.
func New(servers []redis.UniversalClient, opts Options) *Locker {
	if opts.TTL <= 0 {
		opts.TTL = 30 * time.Second
	}
	opts.TTL = max(opts.TTL, time.Millisecond)
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.ServerTimeout <= 0 {
		opts.ServerTimeout = min(max(opts.TTL/20, min(5*time.Millisecond, opts.TTL/2)), time.Second)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 32 * time.Millisecond
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	return &Locker{servers: servers, quorum: len(servers)/2 + 1, opts: opts}
}

// Servers is how many servers the Locker uses; Quorum how many must grant.
func (l *Locker) Servers() int { return len(l.servers) }

// Quorum is the majority of the servers that must grant a lock.
func (l *Locker) Quorum() int { return l.quorum }

// Lock acquires key on a majority of the servers, trying again after a
// random delay while it cannot, for at most Options.Wait and never past
// ctx. Giving up returns *Error wrapping ErrTimeout, ctx.Err()
// (context.DeadlineExceeded for the Wait budget) and the last try's error
// (ErrNotAcquired, ErrNoQuorum with the servers' errors, or ErrTooSlow).
func (l *Locker) Lock(ctx context.Context, key string) (*Lease, error) {
	return l.acquire(ctx, key, "lock", true)
}

// TryLock makes one round and never waits: *Error wrapping the round's
// failure (ErrNotAcquired, ErrNoQuorum or ErrTooSlow).
func (l *Locker) TryLock(ctx context.Context, key string) (*Lease, error) {
	return l.acquire(ctx, key, "trylock", false)
}

func (l *Locker) acquire(ctx context.Context, key, op string, wait bool) (*Lease, error) {
	start := time.Now()
	var cmds atomic.Int64
	lease, err := l.attempt(ctx, key, op, wait, &cmds)
	if l.opts.Observer != nil {
		l.opts.Observer.Acquired(key, err, time.Since(start), int(cmds.Load()))
	}
	return lease, err
}

func (l *Locker) attempt(ctx context.Context, key, op string, wait bool, cmds *atomic.Int64) (*Lease, error) {
	if len(l.servers) == 0 {
		return nil, &Error{Op: op, Key: key, Err: ErrNoServers}
	}
	fk, err := fenceKey(key)
	if err != nil {
		return nil, &Error{Op: op, Key: key, Err: err}
	}
	wctx := ctx
	if wait {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, l.opts.Wait)
		defer cancel()
	}
	r := &round{l: l, key: key, keys: []string{key, fk}, token: crand.Text(), cmds: cmds}
	if l.opts.FenceFloor != nil {
		r.floor = &floorSource{fn: l.opts.FenceFloor, key: key}
	}
	ceil := l.opts.MinBackoff
	var timer *time.Timer
	for {
		if wctx.Err() != nil {
			return nil, timeoutError(op, key, wctx, r.lastErr)
		}
		if lease := r.run(ctx, wctx); lease != nil {
			return lease, nil
		}
		if wctx.Err() != nil {
			return nil, timeoutError(op, key, wctx, r.lastErr)
		}
		if !wait {
			return nil, &Error{Op: op, Key: key, Err: r.lastErr}
		}
		// Full jitter above the floor: contenders that split the servers
		// between them must not all come back at the same moment.
		d := l.opts.MinBackoff + rand.N(ceil-l.opts.MinBackoff+1)
		ceil = min(2*ceil, l.opts.MaxBackoff)
		if dl, ok := wctx.Deadline(); ok && time.Until(dl) <= d {
			// One last try just before the budget ends rather than none.
			d = max(time.Until(dl)-l.opts.ServerTimeout, 0)
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-wctx.Done():
			return nil, timeoutError(op, key, wctx, r.lastErr)
		case <-timer.C:
		}
	}
}

// timeoutError reports giving up: ErrTimeout wrapping ctx's error and why
// the last try failed.
func timeoutError(op, key string, ctx context.Context, last error) error {
	err := fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	if last != nil {
		err = fmt.Errorf("%w (last try: %w)", err, last)
	}
	return &Error{Op: op, Key: key, Err: err}
}

// drift is the allowance for clock-rate differences between this process
// and the servers, taken off the validity.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// Reply states of one server's acquire.
const (
	granted = iota + 1
	refused // held by someone else
	failed  // error or no answer: it may or may not have set the key
)

// reply is one server's answer to a command.
type reply struct {
	server int
	state  int
	n      int64 // the fence (acquire) or the script's integer reply
	err    error
}

// calls is a fan-out of one command to some servers, each call in its own
// goroutine under its own ServerTimeout; the goroutines never block, and
// whoever holds calls waits for the rest with drain.
type calls struct {
	ch      chan reply
	pending int
}

func (l *Locker) fanout(ctx context.Context, servers []int, call func(ctx context.Context, i int) reply) *calls {
	c := &calls{ch: make(chan reply, len(servers)), pending: len(servers)}
	for _, i := range servers {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, l.opts.ServerTimeout)
			defer cancel()
			c.ch <- call(cctx, i)
		}()
	}
	return c
}

// next returns the next reply, or false when stop or done fires first.
func (c *calls) next(stop <-chan time.Time, done <-chan struct{}) (reply, bool) {
	if c.pending == 0 {
		return reply{}, false
	}
	select {
	case r := <-c.ch:
		c.pending--
		return r, true
	case <-stop:
	case <-done:
	}
	return reply{}, false
}

// drain waits up to d for the calls still running, and returns their replies.
func (c *calls) drain(d time.Duration) []reply {
	t := time.NewTimer(d)
	defer t.Stop()
	var out []reply
	for {
		r, ok := c.next(t.C, nil)
		if !ok {
			return out
		}
		out = append(out, r)
	}
}

func allServers(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// round is the state of one Lock call across its tries.
type round struct {
	l       *Locker
	key     string
	keys    []string // the lock key and its fence hash
	token   string
	floor   *floorSource // nil without Options.FenceFloor
	cmds    *atomic.Int64
	lastErr error
}

// run makes one try: the acquire script on every server at once, decided
// as soon as a majority granted or can no longer grant. It returns the
// lease, or nil with r.lastErr set, after deleting our key wherever it may
// have been set. wctx ends the try early (Lock's budget or the caller).
func (r *round) run(ctx, wctx context.Context) *Lease {
	l := r.l
	n := len(l.servers)
	sent := time.Now()
	// The calls are not bound to wctx, which ends when Lock returns: the
	// ones still running when a majority granted belong to the lease, whose
	// Release waits for them. A caller who gives up cancels them.
	cctx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	acq := l.fanout(cctx, allServers(n), r.acquireOn)
	stop := context.AfterFunc(wctx, cancelCalls)
	timer := time.NewTimer(l.opts.ServerTimeout)
	defer timer.Stop()

	state := make([]int, n) // 0 while no answer
	var grants []reply
	var errs []error
	refusals := 0
	for len(grants) < l.quorum && len(grants)+acq.pending >= l.quorum {
		rp, ok := acq.next(timer.C, wctx.Done())
		if !ok {
			break
		}
		state[rp.server] = rp.state
		switch rp.state {
		case granted:
			grants = append(grants, rp)
		case refused:
			refusals++
		default:
			errs = append(errs, fmt.Errorf("server %d: %w", rp.server, rp.err))
		}
	}
	var err error
	if len(grants) < l.quorum {
		if acq.pending > 0 && wctx.Err() == nil {
			errs = append(errs, fmt.Errorf("%d servers: no answer within %v", acq.pending, l.opts.ServerTimeout))
		}
		if wctx.Err() != nil {
			errs = append(errs, wctx.Err())
		}
		// Held somewhere is the usual reason, and what a waiter waits out.
		sentinel := ErrNoQuorum
		if refusals > 0 {
			sentinel = ErrNotAcquired
		}
		err = fmt.Errorf("%w: %d of %d servers granted, %d refused", sentinel, len(grants), n, refusals)
		if len(errs) > 0 {
			err = fmt.Errorf("%w: %w", err, errors.Join(errs...))
		}
	}
	var fence int64
	var fix *calls
	if err == nil {
		fence, fix, err = r.catchUp(cctx, grants, timer, wctx.Done())
	}
	deadline := sent.Add(l.opts.TTL - drift(l.opts.TTL))
	if err == nil && !time.Now().Before(deadline) {
		err = fmt.Errorf("%w: %v after the first command, TTL %v", ErrTooSlow, time.Since(sent), l.opts.TTL)
	}
	if err == nil && stop() {
		return l.grant(ctx, r.key, r.keys, r.token, fence, sent, deadline, []*calls{acq, fix}, cancelCalls)
	}
	if err == nil { // the caller gave up just as the round was won
		err = wctx.Err()
	}
	stop()
	if wctx.Err() == nil || r.lastErr == nil || len(grants)+refusals > 0 {
		// A try cut short before any server answered says less than the
		// last one that was not.
		r.lastErr = err
	}
	// Give up: wait for the calls still running, so that the deletes come
	// after any set they make, then delete our key on every server that
	// did not refuse.
	if wctx.Err() != nil {
		cancelCalls()
	}
	for _, rp := range acq.drain(l.opts.ServerTimeout) {
		state[rp.server] = rp.state
	}
	if fix != nil {
		fix.drain(l.opts.ServerTimeout)
	}
	cancelCalls()
	var mine []int
	for i, s := range state {
		if s != refused {
			mine = append(mine, i)
		}
	}
	if len(mine) > 0 {
		r.cmds.Add(int64(len(mine)))
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.ServerTimeout)
		l.release(rctx, r.keys, r.token, mine).drain(l.opts.ServerTimeout)
		cancel()
	}
	return nil
}

// acquireOn runs the acquire script on server i, asking for the fence
// floor and running it again when the server has no counter.
func (r *round) acquireOn(ctx context.Context, i int) reply {
	floor := ""
	if r.floor == nil {
		floor = "0"
	}
	for {
		r.cmds.Add(1)
		v, err := run(ctx, r.l.servers[i], acquireScript, r.keys, r.token, ms(r.l.opts.TTL), floor)
		if err != nil {
			return reply{server: i, state: failed, err: err}
		}
		a, err := replyInts(v)
		switch {
		case err != nil:
			return reply{server: i, state: failed, err: err}
		case a[0] == 1 && len(a) == 2:
			return reply{server: i, state: granted, n: a[1]}
		case a[0] == 0:
			return reply{server: i, state: refused}
		case a[0] == -1 && floor == "":
			if floor, err = r.floor.get(ctx); err != nil {
				return reply{server: i, state: failed, err: fmt.Errorf("fence floor: %w", err)}
			}
			continue
		}
		return reply{server: i, state: failed, err: fmt.Errorf("%w: %v", errUnexpectedReply, a)}
	}
}

// catchUp makes the lease's fence the largest the granting majority
// returned, and raises to it every counter of that majority below it
// (while our key is still there), so that the next holder's majority,
// which shares a server with this one, mints a larger fence. It returns
// the fence, the catch-up calls (nil when the counters agreed) and an
// error when fewer than a majority could be brought up.
func (r *round) catchUp(ctx context.Context, grants []reply, timer *time.Timer, done <-chan struct{}) (int64, *calls, error) {
	fence := int64(0)
	for _, g := range grants {
		fence = max(fence, g.n)
	}
	var low []int
	for _, g := range grants {
		if g.n < fence {
			low = append(low, g.server)
		}
	}
	up := len(grants) - len(low)
	if up >= r.l.quorum {
		return fence, nil, nil
	}
	r.cmds.Add(int64(len(low)))
	timer.Reset(r.l.opts.ServerTimeout)
	arg := strconv.FormatInt(fence, 10)
	fix := r.l.fanout(ctx, low, func(ctx context.Context, i int) reply {
		v, err := run(ctx, r.l.servers[i], catchupScript, r.keys, r.token, arg)
		if err != nil {
			return reply{server: i, state: failed, err: err}
		}
		if v != int64(1) {
			return reply{server: i, state: refused}
		}
		return reply{server: i, state: granted}
	})
	var errs []error
	for up < r.l.quorum {
		rp, ok := fix.next(timer.C, done)
		if !ok {
			break
		}
		switch rp.state {
		case granted:
			up++
		case refused:
			errs = append(errs, fmt.Errorf("server %d: key gone before its fence counter caught up", rp.server))
		default:
			errs = append(errs, fmt.Errorf("server %d: fence catch-up: %w", rp.server, rp.err))
		}
	}
	if up < r.l.quorum {
		return 0, fix, fmt.Errorf("%w: fence counters at %d on %d servers, a majority is %d: %w",
			ErrNoQuorum, fence, up, r.l.quorum, errors.Join(errs...))
	}
	return fence, fix, nil
}

// release runs the compare-and-delete script on the given servers.
func (l *Locker) release(ctx context.Context, keys []string, token string, servers []int) *calls {
	return l.fanout(ctx, servers, func(ctx context.Context, i int) reply {
		v, err := run(ctx, l.servers[i], releaseScript, keys, token)
		switch {
		case err != nil:
			return reply{server: i, state: failed, err: err}
		case v == int64(1):
			return reply{server: i, state: granted}
		}
		return reply{server: i, state: refused}
	})
}

// floorSource asks Options.FenceFloor once per Lock call, for whichever
// server first finds its counter missing.
type floorSource struct {
	fn  func(ctx context.Context, key string) (int64, error)
	key string

	mu   sync.Mutex
	have bool
	v    string
}

func (f *floorSource) get(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.have {
		v, err := f.fn(ctx, f.key)
		if err != nil {
			return "", err
		}
		if v < 0 {
			return "", fmt.Errorf("%d is negative", v)
		}
		f.v, f.have = strconv.FormatInt(v, 10), true
	}
	return f.v, nil
}

// run runs s by its digest and falls back to sending the source when the
// server does not have it cached (first use, or after a restart).
func run(ctx context.Context, rdb redis.Scripter, s *redis.Script, keys []string, args ...any) (any, error) {
	v, err := s.EvalSha(ctx, rdb, keys, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = s.Eval(ctx, rdb, keys, args...).Result()
	}
	return v, err
}

// replyInts reads a script reply that is an array of integers.
func replyInts(v any) ([]int64, error) {
	r, ok := v.([]any)
	if !ok || len(r) == 0 {
		return nil, fmt.Errorf("%w: %v", errUnexpectedReply, v)
	}
	out := make([]int64, len(r))
	for i, e := range r {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: %v", errUnexpectedReply, v)
		}
		out[i] = n
	}
	return out, nil
}

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// fenceKey names the fencing counter that belongs to key, in the same Redis
// Cluster slot: "lock:{sku-1}" → "lock:{sku-1}:redlock-fence"; a key
// without a hash tag is its own tag: "lock-a" → "{lock-a}:redlock-fence".
// The name differs from the Redis lock package's counter, so the two never
// share one even on one server.
func fenceKey(key string) (string, error) {
	const suffix = ":redlock-fence"
	if key == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if open := strings.IndexByte(key, '{'); open >= 0 && strings.IndexByte(key[open+1:], '}') > 0 {
		return key + suffix, nil
	}
	if strings.Contains(key, "}") {
		return "", fmt.Errorf("%w: %q has no hash tag and contains '}' (use a tag: \"lock:{id}\")", ErrInvalidKey, key)
	}
	return "{" + key + "}" + suffix, nil
}
