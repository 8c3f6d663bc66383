// Package zklock provides a ZooKeeper lock whose leases end with the
// holder's ZooKeeper session and carry the lock node's czxid as fencing
// token.
//
// The recipe is ZooKeeper's own (Curator's InterProcessMutex): an
// ephemeral sequential node per contender under Root/key; the lowest
// holds the lock and each waiter watches only its predecessor. One Locker
// is one session, and its Lock callers of a key queue in memory first, so
// ZooKeeper holds one node per process. A lease's Context is cancelled
// when the connection drops (the session may have expired), the session
// expires, the node is deleted, or the Locker is closed. A ZooKeeper
// restarted without its data restarts zxids below the fences already
// stored: sales are refused, never unsafe. docs/locks.md has the details.
package zklock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/go-zookeeper/zk"

	"inventory/internal/lock"
	"inventory/internal/lock/localqueue"
)

// Backend names this package in errors and fences: a lease's
// Fence().Backend, and the Backend of every *lock.Error it returns.
const Backend = "zklock"

// Options configures a Locker. The zero value works; lock.Options has TTL
// (the ZooKeeper session timeout asked for, which the server clamps to its
// [minSessionTimeout, maxSessionTimeout]: a holder that the server has not
// heard from for this long loses its locks; nothing else limits how long a
// lock is held), Wait and Observer (its roundTrips are the ZooKeeper
// requests made; Lost is called from the ZooKeeper client's own
// goroutine), with their defaults.
type Options struct {
	lock.Options
	// Root is the znode under which each key gets its lock node; default
	// "/inventory/locks". Created when missing.
	Root string
	// Dialer opens connections to the servers; nil means net.DialTimeout.
	// (Tests use it to cut a Locker off.)
	Dialer func(network, address string, timeout time.Duration) (net.Conn, error)
}

// Causes of a lost lease of this package's own: each wraps lock.ErrLost.
var (
	// ErrDisconnected: the connection to ZooKeeper dropped while the lock
	// was held; the session may have expired (see docs/locks.md).
	ErrDisconnected = fmt.Errorf("%w: connection to ZooKeeper lost", lock.ErrLost)
	// ErrSessionExpired: ZooKeeper expired the session, deleting its nodes.
	ErrSessionExpired = fmt.Errorf("%w: ZooKeeper session expired", lock.ErrLost)
	// ErrNodeDeleted: the lock node was deleted by someone else while held.
	ErrNodeDeleted = fmt.Errorf("%w: lock node deleted", lock.ErrLost)
)

const (
	// protectedPrefix is Curator's (and go-zookeeper's) mark of a
	// protected node: _c_<guid>-.
	protectedPrefix = "_c_"
	lockName        = "lock-"
	// seqDigits is the width of the sequence ZooKeeper appends.
	seqDigits = 10
)

// DefaultRoot is Options.Root's default: a key's lock nodes are the
// children of DefaultRoot+"/"+key (see Holder).
const DefaultRoot = "/inventory/locks"

// Locker takes and releases locks in ZooKeeper over one session. Create one
// per process and share it; it is safe for concurrent use. Close it.
type Locker struct {
	conn   *zk.Conn
	events <-chan zk.Event
	opts   Options
	acl    []zk.ACL

	mu     sync.Mutex
	epoch  uint64              // connection losses so far
	leases map[*Lease]struct{} // granted and neither lost nor released
	closed bool
	up     chan struct{} // closed (and replaced) when a session is (re)established
	quit   chan struct{} // closed by Close
	wg     sync.WaitGroup

	parents sync.Map // lock parents known to exist
	// waiters queues this Locker's Lock callers of one key in memory: one of
	// them at a time has a node in ZooKeeper (see docs/locks.md).
	waiters localqueue.Queues
}

// New connects to servers (host:port each) and waits, up to ctx, for a
// session.
func New(ctx context.Context, servers []string, opts Options) (*Locker, error) {
	opts.Options = opts.WithDefaults()
	if opts.Root == "" {
		opts.Root = DefaultRoot
	}
	if !strings.HasPrefix(opts.Root, "/") || strings.HasSuffix(opts.Root, "/") {
		return nil, &lock.Error{Backend: Backend, Op: "connect", Key: opts.Root, Err: errors.New("Root must start and not end with /")}
	}
	l := &Locker{
		opts:   opts,
		acl:    zk.WorldACL(zk.PermAll),
		leases: map[*Lease]struct{}{},
		up:     make(chan struct{}),
		quit:   make(chan struct{}),
	}
	dial := opts.Dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	conn, events, err := zk.Connect(servers, opts.TTL,
		zk.WithEventCallback(l.onEvent), zk.WithLogger(quiet{}), zk.WithLogInfo(false),
		zk.WithDialer(cappedDialer(dial, deadlineLimit(opts.TTL))))
	if err != nil {
		return nil, &lock.Error{Backend: Backend, Op: "connect", Key: strings.Join(servers, ","), Err: err}
	}
	l.conn, l.events = conn, events
	for {
		up, _ := l.session()
		if conn.State() == zk.StateHasSession {
			return l, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			_ = l.Close()
			return nil, &lock.Error{Backend: Backend, Op: "connect", Key: strings.Join(servers, ","), Err: fmt.Errorf("no ZooKeeper session: %w", ctx.Err())}
		}
	}
}

// quiet drops go-zookeeper's log lines: connection trouble reaches callers
// as errors and lost leases.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Close ends the session (ZooKeeper deletes its nodes at once), cancels
// every held lease's Context with lock.ErrClosed, and waits for the Locker's
// goroutines.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.quit)
	l.mu.Unlock()
	l.conn.Close()
	// events is closed when the client's goroutines have ended. One stuck
	// in a handshake with a server that accepts but does not answer (a
	// paused one) only ends at its read deadline, up to the session
	// timeout (deadline.go): do not wait that long.
	drained := time.After(closeTimeout)
drain:
	for {
		select {
		case _, ok := <-l.events:
			if !ok {
				break drain
			}
		case <-drained:
			break drain
		}
	}
	l.wg.Wait()
	l.loseAll(lock.ErrClosed)
	return nil
}

// closeTimeout bounds how long Close waits for the client's goroutines.
const closeTimeout = 5 * time.Second

// onEvent sees the session's state changes, on the client's goroutine.
func (l *Locker) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		l.mu.Lock()
		close(l.up)
		l.up = make(chan struct{})
		l.mu.Unlock()
	case zk.StateDisconnected:
		l.loseAll(ErrDisconnected)
	case zk.StateExpired:
		l.loseAll(ErrSessionExpired)
	}
}

// loseAll ends every held lease: the connection it was granted on is gone.
func (l *Locker) loseAll(cause error) {
	l.mu.Lock()
	l.epoch++
	leases := l.leases
	l.leases = map[*Lease]struct{}{}
	if l.closed {
		cause = lock.ErrClosed
	}
	l.mu.Unlock()
	for le := range leases {
		le.lose(cause)
	}
}

// session is the channel closed when a session next comes up, and the
// current session's epoch.
func (l *Locker) session() (up chan struct{}, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up, l.epoch
}

// spawn runs f in a goroutine Close waits for; false once closed.
func (l *Locker) spawn(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
	return true
}

// future is one ZooKeeper request running in a goroutine of the Locker's.
type future[T any] struct {
	ch     chan T
	state  atomic.Int32 // 0 running, 1 delivered, 2 abandoned by the caller
	orphan func(T)
}

// request starts f; orphan, if not nil, gets f's result when the caller
// gave up waiting for it, to undo it.
func request[T any](l *Locker, f func() T, orphan func(T)) (*future[T], error) {
	fu := &future[T]{ch: make(chan T, 1), orphan: orphan}
	if !l.spawn(func() {
		v := f()
		if fu.state.CompareAndSwap(0, 1) {
			fu.ch <- v
		} else if fu.orphan != nil {
			fu.orphan(v)
		}
	}) {
		return nil, lock.ErrClosed
	}
	return fu, nil
}

// wait returns the request's result, or false when ctx ended first.
func (fu *future[T]) wait(ctx context.Context) (T, bool) {
	select {
	case v := <-fu.ch:
		return v, true
	case <-ctx.Done():
		if fu.state.CompareAndSwap(0, 2) {
			var zero T
			return zero, false
		}
		return <-fu.ch, true
	}
}

type result[T any] struct {
	v   T
	err error
}

// call runs one request and waits for it up to ctx.
func call[T any](l *Locker, ctx context.Context, f func() (T, error), orphan func(T, error)) (T, error) {
	var o func(result[T])
	if orphan != nil {
		o = func(r result[T]) { orphan(r.v, r.err) }
	}
	fu, err := request(l, func() result[T] { v, err := f(); return result[T]{v, err} }, o)
	if err != nil {
		var zero T
		return zero, err
	}
	r, ok := fu.wait(ctx)
	if !ok {
		var zero T
		return zero, ctx.Err()
	}
	return r.v, r.err
}

// connErr reports a request that failed because the connection or session
// failed, not because of what it asked.
func connErr(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrClosing)
}

// awaitSession waits until the client has a session again, or ctx ends.
func (l *Locker) awaitSession(ctx context.Context) error {
	up, _ := l.session() // before the state check, so a session that comes meanwhile wakes us
	var retry <-chan time.Time
	if l.conn.State() == zk.StateHasSession {
		// The session is back but the request still failed (it was sent
		// before): retry, a little later so a flapping link cannot spin us.
		up = nil
		t := time.NewTimer(5 * time.Millisecond)
		defer t.Stop()
		retry = t.C
	}
	select {
	case <-up:
	case <-retry:
	case <-l.quit:
		return lock.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// parentPath is the znode key's lock nodes live under.
func (l *Locker) parentPath(key string) (string, error) {
	if key == "" || key == "." || key == ".." || key == "zookeeper" || strings.ContainsRune(key, '/') {
		return "", fmt.Errorf("%w %q: not a znode name", lock.ErrInvalidKey, key)
	}
	for _, r := range key {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return "", fmt.Errorf("%w %q: not a znode name", lock.ErrInvalidKey, key)
		}
	}
	return l.opts.Root + "/" + key, nil
}

// ensureParent creates path and its ancestors (persistent, empty) once per
// Locker; lock nodes are created under it.
func (l *Locker) ensureParent(ctx context.Context, path string, trips *int) error {
	if _, ok := l.parents.Load(path); ok {
		return nil
	}
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		p := path[:i]
		for {
			*trips++
			_, err := call(l, ctx, func() (string, error) { return l.conn.Create(p, nil, 0, l.acl) }, nil)
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			if !connErr(err) {
				return err
			}
			if err := l.awaitSession(ctx); err != nil {
				return err
			}
		}
	}
	l.parents.Store(path, true)
	return nil
}

// newGUID is the protection mark of one acquisition's node.
func newGUID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// seq is a lock node's sequence number, or false for a name that is not one.
func seq(name string) (int64, bool) {
	if len(name) < seqDigits || !strings.HasPrefix(name, protectedPrefix) {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-seqDigits:], 10, 64)
	return n, err == nil
}

// Holder is the lock node among a lock's children that holds it (the lowest
// sequence), or false when none of them is a lock node.
func Holder(children []string) (string, bool) {
	if nodes := sortNodes(children); len(nodes) > 0 {
		return nodes[0], true
	}
	return "", false
}

// sortNodes sorts lock node names by sequence, dropping anything else.
func sortNodes(children []string) []string {
	nodes := slices.DeleteFunc(slices.Clone(children), func(c string) bool { _, ok := seq(c); return !ok })
	slices.SortFunc(nodes, func(a, b string) int {
		x, _ := seq(a)
		y, _ := seq(b)
		return int(x - y)
	})
	return nodes
}

// Lock acquires key, waiting (watching its predecessor) while it is held,
// for at most Options.Wait and never past ctx. Giving up deletes this
// acquisition's node and returns *lock.Error wrapping lock.ErrTimeout and ctx.Err()
// (context.DeadlineExceeded for the Wait budget); a ZooKeeper failure
// returns *lock.Error wrapping it. The lease's Context derives from ctx.
func (l *Locker) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, key, "lock", true, l.attempt)
}

// TryLock makes one attempt: *lock.Error wrapping lock.ErrNotAcquired if key is held
// (by anyone else, this Locker included).
func (l *Locker) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, key, "trylock", false, l.attempt)
}

func (l *Locker) attempt(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	a := &acquisition{l: l, ctx: ctx, key: key, op: op, wait: wait, guid: newGUID()}
	var cancel context.CancelFunc
	a.wctx, cancel = l.opts.WaitContext(ctx, wait)
	defer cancel()
	var lease *Lease
	var err error
	if !wait {
		lease, err = a.run() // TryLock does not queue: a local holder's node refuses it
	} else if done, werr := l.waitInQueue(a.wctx, key); werr != nil {
		err = a.timeout()
		if errors.Is(werr, lock.ErrClosed) {
			err = a.fail(lock.ErrClosed)
		}
	} else if lease, err = a.run(); err != nil {
		done()
	} else {
		lease.done = done
	}
	*trips = a.trips
	return lease, err
}

// waitInQueue waits until this Locker's caller is first in key's local
// queue, or ctx or Close ends the wait.
func (l *Locker) waitInQueue(ctx context.Context, key string) (func(), error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.quit:
			cancel()
		case <-tctx.Done():
		}
	}()
	done, err := l.waiters.Wait(tctx, key)
	if err != nil && ctx.Err() == nil {
		return nil, lock.ErrClosed
	}
	return done, err
}

// acquisition is one Lock or TryLock call.
type acquisition struct {
	l      *Locker
	ctx    context.Context // the caller's: the lease derives from it
	wctx   context.Context // ctx bounded by Options.Wait
	key    string
	op     string
	wait   bool
	guid   string
	parent string
	node   string          // our node's name under parent; "" while we have none
	czxid  int64           // our node's, once read
	own    <-chan zk.Event // the watch on our node, set when czxid was read
	trips  int
}

func (a *acquisition) fail(err error) error {
	return &lock.Error{Backend: Backend, Op: a.op, Key: a.key, Err: err}
}

func (a *acquisition) timeout() error {
	return a.fail(fmt.Errorf("%w: %w", lock.ErrTimeout, a.wctx.Err()))
}

// giveUp removes our node (if any) so that it does not hold up the
// waiters behind it, and returns err.
func (a *acquisition) giveUp(err error) (*Lease, error) {
	a.l.remove(a.ctx, a.wctx, a.parent, a.guid, a.node)
	return nil, err
}

// stop is the error for a request that failed: a timeout when the budget
// ran out meanwhile, else the failure itself.
func (a *acquisition) stop(err error) (*Lease, error) {
	switch {
	case a.wctx.Err() != nil:
		return a.giveUp(a.timeout())
	case errors.Is(err, lock.ErrClosed):
		return a.giveUp(a.fail(lock.ErrClosed))
	}
	return a.giveUp(a.fail(err))
}

func (a *acquisition) run() (*Lease, error) {
	parent, err := a.l.parentPath(a.key)
	if err != nil {
		return nil, a.fail(err)
	}
	a.parent = parent
	for {
		if a.wctx.Err() != nil {
			return a.giveUp(a.timeout())
		}
		if a.node == "" {
			if err := a.create(); err != nil {
				return a.stop(err)
			}
		}
		_, epoch := a.l.session()
		nodes, err := a.look()
		switch {
		case errors.Is(err, zk.ErrNoNode): // the parent is gone, and our node with it
			a.l.parents.Delete(a.parent)
			a.node = ""
			continue
		case connErr(err):
			if err := a.l.awaitSession(a.wctx); err != nil {
				return a.stop(err)
			}
			continue
		case err != nil:
			return a.stop(err)
		}
		i := slices.Index(nodes, a.node)
		if i < 0 || a.czxid == 0 { // our node is gone: its session expired
			a.node, a.czxid, a.own = "", 0, nil
			continue
		}
		if i == 0 {
			if lease, ok := a.l.grant(a, epoch); ok {
				return lease, nil
			}
			continue // the connection dropped while we looked: look again
		}
		if !a.wait {
			return a.giveUp(a.fail(lock.ErrNotAcquired))
		}
		if err := a.watch(nodes[i-1]); err != nil {
			return a.stop(err)
		}
	}
}

// create makes our node, finding it by its GUID when the reply was lost.
func (a *acquisition) create() error {
	l := a.l
	if err := l.ensureParent(a.wctx, a.parent, &a.trips); err != nil {
		return err
	}
	prefix := a.parent + "/" + protectedPrefix + a.guid + "-" + lockName
	for {
		a.trips++
		path, err := call(l, a.wctx, func() (string, error) {
			return l.conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, l.acl)
		}, func(_ string, _ error) {
			// Given up before the reply: the node may exist.
			l.cleanup(a.parent, a.guid)
		})
		switch {
		case err == nil:
			a.node, a.czxid, a.own = path[len(a.parent)+1:], 0, nil
			return nil
		case errors.Is(err, zk.ErrNoNode): // the parent was deleted by hand
			l.parents.Delete(a.parent)
			if err := l.ensureParent(a.wctx, a.parent, &a.trips); err != nil {
				return err
			}
			continue
		case !connErr(err):
			return err
		}
		if err := l.awaitSession(a.wctx); err != nil {
			return err
		}
		if errors.Is(err, zk.ErrSessionExpired) {
			continue // the node died with the session, if it was made
		}
		// The create may have been applied before the connection dropped.
		a.trips++
		children, err := call(l, a.wctx, func() ([]string, error) {
			children, _, err := l.conn.Children(a.parent)
			return children, err
		}, nil)
		if err != nil && !connErr(err) {
			return err
		}
		for _, c := range children {
			if strings.HasPrefix(c, protectedPrefix+a.guid) {
				a.node, a.czxid, a.own = c, 0, nil
				return nil
			}
		}
	}
}

// ownNode is our node's czxid and a watch on it.
type ownNode struct {
	czxid int64
	watch <-chan zk.Event
}

// look lists the lock's nodes in sequence order and, the first time, reads
// our node's czxid and sets a watch on it (so that a holder whose node is
// deleted by hand learns it), both requests in flight at once.
func (a *acquisition) look() ([]string, error) {
	l := a.l
	var stat *future[result[ownNode]]
	if a.czxid == 0 {
		a.trips++
		node := a.parent + "/" + a.node
		var err error
		stat, err = request(l, func() result[ownNode] {
			_, st, ch, err := l.conn.GetW(node)
			if errors.Is(err, zk.ErrNoNode) {
				return result[ownNode]{ownNode{}, nil} // czxid 0: gone
			}
			if err != nil {
				return result[ownNode]{ownNode{}, err}
			}
			return result[ownNode]{ownNode{st.Czxid, ch}, nil}
		}, nil)
		if err != nil {
			return nil, err
		}
	}
	a.trips++
	children, err := call(l, a.wctx, func() ([]string, error) {
		children, _, err := l.conn.Children(a.parent)
		return children, err
	}, nil)
	if stat != nil {
		r, ok := stat.wait(a.wctx)
		if !ok {
			return nil, a.wctx.Err()
		}
		if err == nil {
			err = r.err
		}
		a.czxid, a.own = r.v.czxid, r.v.watch
	}
	if err != nil {
		return nil, err
	}
	return sortNodes(children), nil
}

// watch waits until predecessor is gone (or the watch ends otherwise).
func (a *acquisition) watch(predecessor string) error {
	l := a.l
	a.trips++
	path := a.parent + "/" + predecessor
	ch, err := call(l, a.wctx, func() (<-chan zk.Event, error) {
		_, _, ch, err := l.conn.GetW(path)
		return ch, err
	}, nil)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil // gone already: look again
	case connErr(err):
		return l.awaitSession(a.wctx)
	case err != nil:
		return err
	}
	// The watch fires on the delete (or any change, or a lost session):
	// each is a reason to look again. A watch left behind when we give up
	// is dropped by the client when it fires.
	select {
	case <-ch:
		return nil
	case <-a.wctx.Done():
		return a.wctx.Err()
	case <-l.quit:
		return lock.ErrClosed
	}
}

// grant makes the lease, unless the connection dropped since epoch (then
// the listing may be stale and the session in doubt).
func (l *Locker) grant(a *acquisition, epoch uint64) (*Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch || l.closed {
		return nil, false
	}
	lease := &Lease{l: l, parent: a.parent, node: a.node, guid: a.guid}
	lease.Init(a.ctx, lock.Grant{Backend: Backend, Key: a.key, Fence: lock.Fence{Backend: Backend, Token: a.czxid},
		Observer: l.opts.Observer})
	l.leases[lease] = struct{}{}
	if own := a.own; own != nil {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			lease.watch(own)
		}()
	}
	return lease, true
}

// cleanupTimeout bounds the one delete of a known node when Lock gives up
// (past it, cleanup takes over); the Lock waits for it at most
// lock.CleanupWait, never past its wait budget.
const cleanupTimeout = 2 * time.Second

// remove deletes an acquisition's node, in the background: node when
// known, else whatever carries guid. It waits for the delete of a known
// node until wctx (the caller's budget) ends and at most lock.CleanupWait.
func (l *Locker) remove(ctx, wctx context.Context, parent, guid, node string) {
	if parent == "" {
		return
	}
	if node == "" {
		l.spawn(func() { l.cleanup(parent, guid) })
		return
	}
	finished := make(chan struct{})
	if !l.spawn(func() {
		defer close(finished)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		err := l.delete(cctx, parent+"/"+node)
		cancel()
		if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, lock.ErrClosed) {
			return
		}
		l.cleanup(parent, guid)
	}) {
		return // closed: the session's end deletes the node
	}
	lock.AwaitCleanup(wctx, finished)
}

// delete makes one attempt at deleting path. It does not wait through a
// connection loss: the callers hand the node to cleanup instead of making
// their own callers wait.
func (l *Locker) delete(ctx context.Context, path string) error {
	_, err := call(l, ctx, func() (struct{}, error) { return struct{}{}, l.conn.Delete(path, -1) }, nil)
	return err
}

// cleanup deletes parent's nodes that carry guid, retrying while the
// connection is down; it ends when they are gone, the session with them,
// or the Locker is closed (which ends the session). It runs in a goroutine
// of the Locker's.
func (l *Locker) cleanup(parent, guid string) {
	backoff := 10 * time.Millisecond
	for {
		children, _, err := l.conn.Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err == nil {
			for _, c := range children {
				if strings.HasPrefix(c, protectedPrefix+guid) {
					if derr := l.conn.Delete(parent+"/"+c, -1); derr != nil && !errors.Is(derr, zk.ErrNoNode) {
						err = derr
					}
				}
			}
			if err == nil {
				return
			}
		}
		up, _ := l.session()
		t := time.NewTimer(backoff)
		select {
		case <-l.quit:
			t.Stop()
			return
		case <-up:
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, time.Second)
	}
}

// watch loses the lease when its node goes while it is held: deleted by
// someone else (our own Release deletes it too, and is ignored), or its
// session lost. The watch fires at the latest when the client closes.
func (le *Lease) watch(own <-chan zk.Event) {
	select {
	case ev := <-own:
		switch {
		case ev.Type == zk.EventNodeDeleted:
			le.l.forget(le)
			le.lose(ErrNodeDeleted)
		case ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrSessionExpired):
			le.l.forget(le)
			le.lose(ErrSessionExpired)
		}
	case <-le.l.quit:
	}
}

// forget drops a lease from the held set.
func (l *Locker) forget(le *Lease) {
	l.mu.Lock()
	delete(l.leases, le)
	l.mu.Unlock()
}

// Lease is one successful Lock or TryLock: the proof of holding a lock for
// as long as its Context is not cancelled. Its Fence is the lock node's
// czxid, larger than every earlier holder's; its Context is cancelled when
// the lease is lost (cause wrapping lock.ErrLost and ErrDisconnected,
// ErrSessionExpired, ErrNodeDeleted or lock.ErrClosed).
type Lease struct {
	lock.State
	l                  *Locker
	parent, node, guid string

	done func() // takes this Locker's caller out of key's local queue; nil for TryLock
}

var (
	_ lock.Locker = (*Locker)(nil)
	_ lock.Lease  = (*Lease)(nil)
)

// Path is the lease's lock node.
func (le *Lease) Path() string { return le.parent + "/" + le.node }

// lose ends a held lease; the Locker has already forgotten it.
func (le *Lease) lose(cause error) { le.Lose(le.LostError("lock", cause)) }

// Release deletes the lease's node, handing the lock to the next waiter.
// nil: released. An error wrapping lock.ErrLost: the lease had been lost
// before (the work done under it may not have been exclusive); the node
// is still deleted if it survived. lock.ErrNotHeld: the node was gone (its
// session expired), or the lease was already released.
// lock.ErrReleaseUnknown: the delete could not be made or confirmed (the
// connection is down); it is retried in the background, and Release does
// not wait for it. The lease's Context is cancelled in every case.
func (le *Lease) Release(ctx context.Context) error {
	lost, err := le.BeginRelease()
	if err != nil {
		return err
	}
	l := le.l
	l.forget(le)

	err = l.delete(ctx, le.Path())
	if le.done != nil {
		le.done() // after the delete was sent: the next local waiter's create comes behind it
	}
	var rerr error
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		rerr = lock.ErrNotHeld
		if lost != nil {
			rerr = fmt.Errorf("%w: %w", lock.ErrNotHeld, lost)
		}
	case err != nil && !errors.Is(err, lock.ErrClosed):
		l.spawn(func() { l.cleanup(le.parent, le.guid) })
		rerr = fmt.Errorf("%w: %w", lock.ErrReleaseUnknown, err)
		if lost != nil {
			rerr = fmt.Errorf("%w: %w (the lease was lost before: %w)", lock.ErrReleaseUnknown, err, lost)
		}
	case lost != nil:
		rerr = fmt.Errorf("lease was lost before release: %w", lost)
	case err != nil: // closed: the session ended, and the node with it
		rerr = fmt.Errorf("%w: %w", lock.ErrNotHeld, err)
	}
	if rerr != nil {
		rerr = &lock.Error{Backend: Backend, Op: "release", Key: le.Key(), Err: rerr}
	}
	return le.EndRelease(rerr)
}
