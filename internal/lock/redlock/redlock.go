package redlock

import (
	"context"
	crand "crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
	"inventory/internal/lock/internal/redisscript"
	"inventory/internal/lock/localqueue"
)

// Backend names this package in errors and fences: a lease's
// Fence().Backend, and the Backend of every *lock.Error it returns.
const Backend = "redlock"

// Options configures a Locker. The zero value works; lock.Options has
// TTL (the lease time set on each server's key; nothing renews it: a
// lease's validity is TTL less the time its round took and the drift
// allowance, TTL/100 + 2ms), Wait and Observer, with their defaults. The
// Observer's roundTrips are the commands sent to all servers (acquires,
// fence catch-ups and clean-up deletes).
type Options struct {
	lock.Options
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
}

// Errors of this package's own, beside lock's; returned wrapped in
// *lock.Error.
var (
	// ErrNoQuorum: too few servers answered for a majority; it comes
	// joined with their errors.
	ErrNoQuorum = errors.New("no majority of the servers answered")
	// ErrTooSlow: a majority granted, but after the validity was used up.
	ErrTooSlow = errors.New("majority granted after the validity was used up")
	// ErrNoServers: the Locker was built without servers.
	ErrNoServers = errors.New("no servers")
)

var (
	//go:embed catchup.lua
	catchupSrc string

	// On each server, the one-server lock of redislock's Mutex.
	acquireScript = redisscript.Acquire
	catchupScript = redis.NewScript(catchupSrc)
	releaseScript = redisscript.Release

	errUnexpectedReply = redisscript.ErrUnexpectedReply
)

// Locker takes and releases locks on a majority of its servers. Create one
// per process and share it; it is safe for concurrent use.
type Locker struct {
	servers []redis.UniversalClient
	quorum  int
	opts    Options
	// suspect[i] is until when (unix ns) server i is not used as a gate,
	// after a command to it failed.
	suspect []atomic.Int64
	// waiters queues the Lock callers of one key in this process.
	waiters localqueue.Queues
}

// suspectFor is how long a server whose command failed is passed over as
// a gate, so that a hung server costs one ServerTimeout, not one per try.
const suspectFor = time.Second

// gateFor picks the gate of a try on a key whose hash is h: the h-th
// server, or the next one not suspect; -1 (no gate: ask all at once) when
// every server is.
func (l *Locker) gateFor(h int) int {
	now := time.Now().UnixNano()
	for k := range len(l.servers) {
		i := (h + k) % len(l.servers)
		if l.suspect[i].Load() <= now {
			return i
		}
	}
	return -1
}

// New returns a Locker over servers, which must be independent Redis
// servers (not replicas of one another); at least 3 for Redlock to mean
// anything, an odd number to make best use of them. See Options for the
// defaults, and the package doc for the clients' ContextTimeoutEnabled.
func New(servers []redis.UniversalClient, opts Options) *Locker {
	opts.Options = opts.WithDefaults()
	opts.TTL = max(opts.TTL, time.Millisecond)
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
	return &Locker{servers: servers, quorum: len(servers)/2 + 1, opts: opts, suspect: make([]atomic.Int64, len(servers))}
}

// Servers is how many servers the Locker uses; Quorum how many must grant.
func (l *Locker) Servers() int { return len(l.servers) }

// Quorum is the majority of the servers that must grant a lock.
func (l *Locker) Quorum() int { return l.quorum }

// Lock acquires key on a majority of the servers, trying again after a
// random delay while it cannot, for at most Options.Wait and never past
// ctx. Giving up returns *lock.Error wrapping lock.ErrTimeout, ctx.Err()
// (context.DeadlineExceeded for the Wait budget) and the last try's error
// (lock.ErrNotAcquired, ErrNoQuorum with the servers' errors, or ErrTooSlow).
func (l *Locker) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, key, "lock", true, l.attempt)
}

// TryLock makes one round and never waits: *lock.Error wrapping the round's
// failure (lock.ErrNotAcquired, ErrNoQuorum or ErrTooSlow).
func (l *Locker) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, key, "trylock", false, l.attempt)
}

// attempt is one Lock or TryLock; the commands its rounds send, to any
// server and from any goroutine, count in trips.
func (l *Locker) attempt(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	var cmds atomic.Int64
	lease, err := l.rounds(ctx, key, op, wait, &cmds)
	*trips = int(cmds.Load())
	return lease, err
}

func (l *Locker) rounds(ctx context.Context, key, op string, wait bool, cmds *atomic.Int64) (*Lease, error) {
	if len(l.servers) == 0 {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: ErrNoServers}
	}
	fk, err := fenceKey(key)
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
	}
	wctx, cancel := l.opts.WaitContext(ctx, wait)
	defer cancel()
	// Only one Lock caller per key and process contends at a time: many
	// contenders split the servers between them, each winning some and
	// none a majority. The others queue here, in memory.
	leaveQueue := func() {}
	if wait {
		if leaveQueue, err = l.waiters.Wait(wctx, key); err != nil {
			return nil, timeoutError(op, key, wctx, nil)
		}
	}
	granted := false
	defer func() {
		if !granted {
			leaveQueue()
		}
	}()
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	// The gate is the same server for every process (given the servers in
	// the same order), and differs from key to key to spread the load.
	r := &round{l: l, key: key, keys: []string{key, fk}, cmds: cmds, wait: wait, hash: int(h.Sum32() % uint32(len(l.servers))),
		leaveQueue: leaveQueue}
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
			granted = true // the lease leaves the queue
			return lease, nil
		}
		if wctx.Err() != nil {
			return nil, timeoutError(op, key, wctx, r.lastErr)
		}
		if !wait {
			return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: r.lastErr}
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

// timeoutError reports giving up: lock.ErrTimeout wrapping ctx's error and why
// the last try failed.
func timeoutError(op, key string, ctx context.Context, last error) error {
	err := fmt.Errorf("%w: %w", lock.ErrTimeout, ctx.Err())
	if last != nil {
		err = fmt.Errorf("%w (last try: %w)", err, last)
	}
	return &lock.Error{Backend: Backend, Op: op, Key: key, Err: err}
}

// drift is the allowance for clock-rate differences between this process
// and the servers, taken off the validity.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// Reply states of one server's command.
const (
	granted = iota + 1 // set (acquire), raised (catch-up), deleted (release)
	refused            // held by someone else; not ours (release)
	failed             // error or no answer: it may or may not have run
)

// reply is one server's answer to a command.
type reply struct {
	server int
	state  int
	n      int64 // the fence (acquire)
	err    error
}

// parts is one round's work on every server: one goroutine per server sets
// the key and reports on acquired, then, unless the server refused, waits
// for drop (the round lost, or the lease released) and deletes the key by
// token, reporting on released. So a server's delete always follows its
// set, and nobody waits for the slowest server: a lost round's clean-up and
// a release's tail run on in the background, each command bounded by
// ServerTimeout. A goroutine whose key has expired (TTL after the round
// began) without a drop ends without deleting.
type parts struct {
	acquired chan reply
	released chan reply
	drop     chan struct{}
	dropOnce sync.Once
	pending  int // acquire replies not yet read from acquired

	// A gated round asks the gate server first and the others only if it
	// did not refuse; gateDone is closed once it answered.
	gate     int
	gateDone chan struct{}
	gateOpen bool
}

func (p *parts) dropAll() { p.dropOnce.Do(func() { close(p.drop) }) }

// start launches the round's goroutines. calls bounds the acquires (a
// caller who gives up cancels it); the deletes run under ctx without its
// cancellation.
func (r *round) start(ctx, calls context.Context, token string, sent time.Time, gate int) *parts {
	l := r.l
	n := len(l.servers)
	p := &parts{acquired: make(chan reply, n), released: make(chan reply, n), drop: make(chan struct{}), pending: n, gate: -1}
	gated := gate >= 0 && n > 1
	if gated {
		p.gate, p.gateDone = gate, make(chan struct{})
	}
	for i := range n {
		go func() {
			if gated && i != p.gate {
				<-p.gateDone
				if !p.gateOpen {
					p.acquired <- reply{server: i, state: refused}
					p.released <- reply{server: i, state: refused}
					return
				}
			}
			actx, cancel := context.WithTimeout(calls, l.opts.ServerTimeout)
			rp := r.acquireOn(actx, i, token)
			cancel()
			if rp.state == failed && calls.Err() == nil {
				l.suspect[i].Store(time.Now().Add(suspectFor).UnixNano())
			}
			if i == p.gate {
				p.gateOpen = rp.state != refused
				close(p.gateDone)
			}
			p.acquired <- rp
			if rp.state == refused {
				p.released <- reply{server: i, state: refused}
				return
			}
			expired := time.NewTimer(time.Until(sent.Add(l.opts.TTL)))
			defer expired.Stop()
			select {
			case <-p.drop:
			case <-expired.C:
				p.released <- reply{server: i, state: refused}
				return
			}
			r.cmds.Add(1)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.ServerTimeout)
			defer cancel()
			p.released <- l.releaseOn(rctx, i, r.keys, token)
		}()
	}
	return p
}

// round is the state of one Lock call across its tries.
type round struct {
	l          *Locker
	key        string
	keys       []string     // the lock key and its fence hash
	floor      *floorSource // nil without Options.FenceFloor
	cmds       *atomic.Int64
	lastErr    error
	hash       int  // the key's hash, which picks its gate server
	wait       bool // Lock, not TryLock
	tries      int
	leaveQueue func() // takes the caller out of the local queue (localqueue); the lease's once granted
}

// run makes one try: the acquire script on every server at once, decided
// as soon as a majority granted or can no longer grant. It returns the
// lease, or nil with r.lastErr set; a lost try's keys are deleted in the
// background. wctx ends the try early (Lock's budget or the caller).
func (r *round) run(ctx, wctx context.Context) *Lease {
	l := r.l
	n := len(l.servers)
	// A token per try: a later try's set must never be mistaken for this
	// one's by this one's late delete.
	token := crand.Text()
	sent := time.Now()
	calls, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	// Tries are gated: the key's gate server first, the others (in
	// parallel) only if it did not refuse. Waiters then poll one server,
	// not all, and contenders can no longer split the servers between them
	// (each winning some, none a majority, all starting over), which with
	// many contenders is what a Redlock asking all servers at once spends
	// its time on: in internal/stock's race test, 64 buyers, it timed buyers
	// out. The price is a second round trip when the key is free.
	// Exclusion rests on the majority alone, whatever the gate.
	//
	// A key left on the gate alone (by a holder that lost its round, or
	// a command a hung server ran late) would then block the key until its
	// TTL although the others are free: so every fourth try of a Lock, and
	// TryLock's one, asks all servers at once.
	r.tries++
	gate := -1
	if r.wait && r.tries%4 != 0 {
		gate = l.gateFor(r.hash)
	}
	gated := gate >= 0 && n > 1
	p := r.start(ctx, calls, token, sent, gate)
	stop := context.AfterFunc(wctx, cancelCalls)
	defer stop()
	budget := l.opts.ServerTimeout
	if gated {
		budget *= 2
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()

	var grants []reply
	var errs []error
	refusals := 0
	answered := make([]bool, n)
	for len(grants) < l.quorum && len(grants)+p.pending >= l.quorum {
		var rp reply
		select {
		case rp = <-p.acquired:
			p.pending--
		case <-timer.C:
		case <-wctx.Done():
		}
		if rp.state == 0 {
			// No answer in time: pass the silent servers over as gates
			// for a while (only the gate was asked, if gated).
			for i, a := range answered {
				if !a && (!gated || i == gate) {
					l.suspect[i].Store(time.Now().Add(suspectFor).UnixNano())
				}
			}
			break
		}
		answered[rp.server] = true
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
		if wctx.Err() != nil {
			errs = append(errs, wctx.Err())
		} else if p.pending > 0 && len(grants)+p.pending >= l.quorum {
			errs = append(errs, fmt.Errorf("%d servers: no answer within %v", p.pending, budget))
		}
		// Held somewhere is the usual reason, and what a waiter waits out.
		sentinel := ErrNoQuorum
		if refusals > 0 {
			sentinel = lock.ErrNotAcquired
		}
		err = fmt.Errorf("%w: %d of %d servers granted, %d refused", sentinel, len(grants), n, refusals)
		if len(errs) > 0 {
			err = fmt.Errorf("%w: %w", err, errors.Join(errs...))
		}
	}
	var fence int64
	if err == nil {
		timer.Reset(l.opts.ServerTimeout)
		fence, err = r.catchUp(calls, token, grants, timer, wctx.Done())
	}
	deadline := sent.Add(l.opts.TTL - drift(l.opts.TTL))
	if err == nil && !time.Now().Before(deadline) {
		err = fmt.Errorf("%w: %v after the first command, TTL %v", ErrTooSlow, time.Since(sent), l.opts.TTL)
	}
	if err == nil && stop() {
		return l.grant(ctx, r.key, r.keys, token, fence, sent, deadline, p, r.leaveQueue)
	}
	if err == nil { // the caller gave up just as the try was won
		err = wctx.Err()
	}
	if wctx.Err() == nil || r.lastErr == nil {
		// A try cut short says less than the last one that was not.
		r.lastErr = err
	}
	cancelCalls()
	p.dropAll()
	return nil
}

// acquireOn runs the acquire script on server i, asking for the fence
// floor and running it again when the server has no counter.
func (r *round) acquireOn(ctx context.Context, i int, token string) reply {
	floor := ""
	if r.floor == nil {
		floor = "0"
	}
	for {
		r.cmds.Add(1)
		v, _, err := redisscript.Run(ctx, r.l.servers[i], acquireScript, r.keys, token, ms(r.l.opts.TTL), floor)
		if err != nil {
			return reply{server: i, state: failed, err: err}
		}
		a, err := redisscript.ReplyInts(v)
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
// which shares a server with this one, mints a larger fence. It fails when
// fewer than a majority could be brought up in time. Catch-ups still
// running when it returns are harmless whenever they land: each acts only
// while our key is on its server.
func (r *round) catchUp(ctx context.Context, token string, grants []reply, timer *time.Timer, done <-chan struct{}) (int64, error) {
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
		return fence, nil
	}
	r.cmds.Add(int64(len(low)))
	arg := strconv.FormatInt(fence, 10)
	replies := make(chan reply, len(low))
	for _, i := range low {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, r.l.opts.ServerTimeout)
			defer cancel()
			v, _, err := redisscript.Run(cctx, r.l.servers[i], catchupScript, r.keys, token, arg)
			switch {
			case err != nil:
				replies <- reply{server: i, state: failed, err: err}
			case v == int64(1):
				replies <- reply{server: i, state: granted}
			default:
				replies <- reply{server: i, state: refused}
			}
		}()
	}
	var errs []error
	for range low {
		if up >= r.l.quorum {
			break
		}
		var rp reply
		select {
		case rp = <-replies:
		case <-timer.C:
		case <-done:
		}
		switch rp.state {
		case granted:
			up++
			continue
		case refused:
			errs = append(errs, fmt.Errorf("server %d: key gone before its fence counter caught up", rp.server))
			continue
		case failed:
			errs = append(errs, fmt.Errorf("server %d: fence catch-up: %w", rp.server, rp.err))
			continue
		}
		errs = append(errs, fmt.Errorf("fence catch-up: no answer within %v", r.l.opts.ServerTimeout))
		break
	}
	if up < r.l.quorum {
		return 0, fmt.Errorf("%w: fence counters at %d on %d servers, a majority is %d: %w",
			ErrNoQuorum, fence, up, r.l.quorum, errors.Join(errs...))
	}
	return fence, nil
}

// releaseOn runs the compare-and-delete script on server i.
func (l *Locker) releaseOn(ctx context.Context, i int, keys []string, token string) reply {
	v, _, err := redisscript.Run(ctx, l.servers[i], releaseScript, keys, token)
	switch {
	case err != nil:
		return reply{server: i, state: failed, err: err}
	case v == int64(1):
		return reply{server: i, state: granted}
	}
	return reply{server: i, state: refused}
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

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// fenceKey names the fencing counter that belongs to key, in the same Redis
// Cluster slot: "lock:{sku-1}" → "lock:{sku-1}:redlock-fence"; a key
// without a hash tag is its own tag: "lock-a" → "{lock-a}:redlock-fence".
// The name differs from package redislock's counter, so the two never
// share one even on one server.
func fenceKey(key string) (string, error) {
	const suffix = ":redlock-fence"
	if key == "" {
		return "", fmt.Errorf("%w: empty", lock.ErrInvalidKey)
	}
	if open := strings.IndexByte(key, '{'); open >= 0 && strings.IndexByte(key[open+1:], '}') > 0 {
		return key + suffix, nil
	}
	if strings.Contains(key, "}") {
		return "", fmt.Errorf("%w: %q has no hash tag and contains '}' (use a tag: \"lock:{id}\")", lock.ErrInvalidKey, key)
	}
	return "{" + key + "}" + suffix, nil
}
