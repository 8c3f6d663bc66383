// Package etcdlock provides a lock held in etcd, whose lease ends with the
// holder's etcd session and whose fencing token is the lock key's create
// revision.
//
// It is the recipe of etcd's concurrency.Mutex, with the same keys (so it
// excludes concurrency.Mutex and `etcdctl lock` users of a name), written
// here so that Options.Wait bounds every call, a waiter stops when its
// session ends, and the create revision is exposed. A Locker keeps one
// session (one etcd lease, kept alive every TTL/3) and queues its callers
// per name in memory, so one contender per name per process talks to
// etcd. A lease's Context is cancelled when the session ends or its key is
// deleted; the session ends at the latest at its deadline, the last
// answered keepalive's send time plus the TTL less a drift allowance,
// before etcd can end the lease. Watches survive etcd's compactions. Release every lease, lost or not: until then the next local
// waiter stays queued. docs/locks.md has the algorithm and the faults.
package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"inventory/internal/lock"
)

// Backend names this package in errors and fences: a lease's
// Fence().Backend, and the Backend of every *lock.Error it returns.
const Backend = "etcdlock"

// Options configures a Locker. The zero value works; lock.Options has
// TTL (the session lease's time to live, rounded up to whole seconds; etcd
// raises it to its minimum, 2s by default), Wait and Observer (its
// roundTrips are the etcd requests made), with their defaults.
type Options struct {
	lock.Options
	// Prefix is put before every lock name in etcd; default "/inventory/locks/".
	Prefix string
}

// Errors of this package's own, beside lock's; returned wrapped in
// *lock.Error.
var (
	// ErrSessionEnded: the session's etcd lease expired, was revoked, or was
	// not refreshed in time; every key on it is (or will soon be) gone. A
	// lease lost this way reports it wrapped with lock.ErrLost; a Lock
	// whose session ended while it waited returns it alone.
	ErrSessionEnded = errors.New("etcd session ended")
	// ErrKeyDeleted: the holder's key was deleted (its lease ended, or by
	// hand): the lock is lost.
	ErrKeyDeleted = fmt.Errorf("%w: lock key deleted", lock.ErrLost)
)

// Locker takes and releases locks in etcd. Create one per process and
// share it; it is safe for concurrent use. Close it to end its session.
type Locker struct {
	client    *clientv3.Client
	ownClient bool
	opts      Options
	ttl       int // seconds

	ctx    context.Context // the sessions' lifetime: cancelled by Close
	cancel context.CancelFunc

	sessMu sync.Mutex
	sess   *session
	closed bool

	qmu    sync.Mutex
	queues map[string]*queue

	wg sync.WaitGroup // sessions' keepalives, and cleanups still running after their Lock returned
}

// queue lets one goroutine per name at a time contend in etcd.
type queue struct {
	first chan struct{} // holds a token while a goroutine is first
	refs  int           // goroutines first or waiting
}

// DefaultPrefix is Options.Prefix's default: a lock name's keys are
// DefaultPrefix+name+"/"+<lease id in hex>, and the holder's is the one with
// the lowest create revision.
const DefaultPrefix = "/inventory/locks/"

// New returns a Locker on client, which stays the caller's to close (after
// the Locker). See Options for the defaults.
func New(client *clientv3.Client, opts Options) *Locker {
	opts.Options = opts.WithDefaults()
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Locker{
		client: client,
		opts:   opts,
		ttl:    int(math.Ceil(opts.TTL.Seconds())),
		ctx:    ctx,
		cancel: cancel,
		queues: map[string]*queue{},
	}
}

// Dial connects to etcd at endpoints (host:port, at least one) and returns
// a Locker that closes the client at Close. It fails if no endpoint answers
// within 5s.
func Dial(ctx context.Context, endpoints []string, opts Options) (*Locker, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcdlock: no endpoints")
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
		Context:              context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlock: connect to %v: %w", endpoints, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var serr error
	for _, ep := range endpoints {
		if _, serr = c.Status(sctx, ep); serr == nil {
			break
		}
	}
	if serr != nil {
		_ = c.Close()
		return nil, fmt.Errorf("etcdlock: etcd at %v: %w", endpoints, serr)
	}
	l := New(c, opts)
	l.ownClient = true
	return l, nil
}

// Client is the etcd client the Locker uses.
func (l *Locker) Client() *clientv3.Client { return l.client }

// Close revokes the session's lease, which deletes every key of this
// Locker (leases still held are lost), and closes the client if Dial made
// it. Lock fails with lock.ErrClosed afterwards.
func (l *Locker) Close() error {
	l.sessMu.Lock()
	l.closed = true
	s := l.sess
	l.sess = nil
	l.sessMu.Unlock()
	var err error
	if s != nil {
		s.end(fmt.Errorf("%w: %w", ErrSessionEnded, lock.ErrClosed))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = l.client.Revoke(ctx, s.Lease())
		cancel()
	}
	l.wg.Wait()
	l.cancel()
	if l.ownClient {
		err = errors.Join(err, l.client.Close())
	}
	return err
}

// session returns the live session, granting a new lease when there is
// none or the last one ended.
func (l *Locker) session(ctx context.Context, trips *int) (*session, error) {
	l.sessMu.Lock()
	defer l.sessMu.Unlock()
	if l.closed {
		return nil, lock.ErrClosed
	}
	if l.sess != nil && l.sess.Ctx().Err() == nil {
		return l.sess, nil
	}
	*trips++
	s, err := grantSession(ctx, l.ctx, l.client, l.ttl, &l.wg)
	if err != nil {
		return nil, err
	}
	l.sess = s
	return s, nil
}

// abandon stops keeping s alive, if it is still the current session, so
// its keys go with its lease within the TTL. It is the answer to a key
// whose deletion failed: left alone, it would block its name for as long
// as the session lives.
func (l *Locker) abandon(s *session) {
	l.sessMu.Lock()
	if l.sess == s {
		l.sess = nil
	}
	l.sessMu.Unlock()
	s.Orphan()
}

// waitInQueue waits until the caller is first in name's local queue;
// without block it fails at once with lock.ErrNotAcquired when another
// goroutine is.
func (l *Locker) waitInQueue(ctx context.Context, name string, block bool) error {
	l.qmu.Lock()
	q := l.queues[name]
	if q == nil {
		q = &queue{first: make(chan struct{}, 1)}
		l.queues[name] = q
	}
	q.refs++
	l.qmu.Unlock()
	if !block {
		select {
		case q.first <- struct{}{}:
			return nil
		default:
			l.leave(name, q)
			return lock.ErrNotAcquired
		}
	}
	select {
	case q.first <- struct{}{}:
		return nil
	case <-ctx.Done():
		l.leave(name, q)
		return ctx.Err()
	case <-l.ctx.Done():
		l.leave(name, q)
		return lock.ErrClosed
	}
}

// leaveQueue takes the caller out of name's local queue, the next local
// waiter first.
func (l *Locker) leaveQueue(name string) {
	l.qmu.Lock()
	q := l.queues[name]
	l.qmu.Unlock()
	<-q.first
	l.leave(name, q)
}

func (l *Locker) leave(name string, q *queue) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if q.refs--; q.refs == 0 {
		delete(l.queues, name)
	}
}

// Lock acquires name, waiting for at most Options.Wait and never past ctx.
// Giving up returns *lock.Error wrapping lock.ErrTimeout and ctx.Err()
// (context.DeadlineExceeded for the Wait budget); the session ending while
// waiting returns ErrSessionEnded; an etcd failure returns *lock.Error wrapping
// it. A failed Lock leaves no key behind.
func (l *Locker) Lock(ctx context.Context, name string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, name, "lock", true, l.attempt)
}

// TryLock makes one attempt: *lock.Error wrapping lock.ErrNotAcquired if name is
// held, by another process or by another goroutine of this one.
func (l *Locker) TryLock(ctx context.Context, name string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, name, "trylock", false, l.attempt)
}

func (l *Locker) attempt(ctx context.Context, name, op string, wait bool, trips *int) (*Lease, error) {
	var wctx context.Context
	var cancel context.CancelFunc
	if wait {
		wctx, cancel = context.WithTimeout(ctx, l.opts.Wait)
	} else {
		wctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	fail := func(err error) error {
		if wctx.Err() != nil && !errors.Is(err, ErrSessionEnded) {
			err = fmt.Errorf("%w: %w", lock.ErrTimeout, wctx.Err())
		}
		return &lock.Error{Backend: Backend, Op: op, Key: name, Err: err}
	}
	if l.ctx.Err() != nil {
		return nil, &lock.Error{Backend: Backend, Op: op, Key: name, Err: lock.ErrClosed}
	}
	if err := l.waitInQueue(wctx, name, wait); err != nil {
		if errors.Is(err, lock.ErrClosed) {
			return nil, &lock.Error{Backend: Backend, Op: op, Key: name, Err: err}
		}
		return nil, fail(err)
	}
	for try := 0; ; try++ {
		s, err := l.session(wctx, trips)
		if err != nil {
			l.leaveQueue(name)
			return nil, fail(err)
		}
		key := fmt.Sprintf("%s%s/%x", l.opts.Prefix, name, s.Lease())
		rev, seen, err := l.contendIn(wctx, s, name, key, wait, trips)
		if err == nil {
			return l.grant(ctx, s, name, key, rev, seen), nil
		}
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && try == 0 {
			// The session's lease ended (revoked, say) before its
			// keepalive noticed: a new session, once.
			l.abandon(s)
			continue
		}
		l.giveUp(ctx, wctx, s, name, key)
		return nil, fail(err)
	}
}

// contendIn is contend under s, ending early when s ends: a waiter whose
// lease is gone can never hold the lock.
func (l *Locker) contendIn(ctx context.Context, s *session, name, key string, wait bool, trips *int) (rev, seen int64, err error) {
	sctx, scancel := context.WithCancelCause(ctx)
	defer scancel(nil)
	stop := context.AfterFunc(s.Ctx(), func() { scancel(s.endCause()) })
	defer stop()
	rev, seen, err = l.contend(sctx, s, name, key, wait, trips)
	if err != nil && !errors.Is(err, ErrSessionEnded) {
		if c := context.Cause(sctx); errors.Is(c, ErrSessionEnded) {
			err = fmt.Errorf("%w: %w", c, err)
		}
	}
	return rev, seen, err
}

// contend puts key and waits until it is the oldest under name; it returns
// key's create revision, and a revision at which key was seen still there
// (and oldest), for the lease's watch on it to start from.
func (l *Locker) contend(ctx context.Context, s *session, name, key string, wait bool, trips *int) (rev, seen int64, err error) {
	pfx := l.opts.Prefix + name + "/"
	for range 2 {
		*trips++
		resp, err := l.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(s.Lease())),
				clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Else(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return 0, 0, err
		}
		if !resp.Succeeded {
			// A key this session left behind (a cleanup that failed): its
			// revision may have been used as a fence already. Gone now; again.
			continue
		}
		rev := resp.Header.Revision
		owner := resp.Responses[1].GetResponseRange().Kvs
		if len(owner) == 0 || owner[0].CreateRevision == rev {
			return rev, rev, nil
		}
		if !wait {
			return 0, 0, lock.ErrNotAcquired
		}
		seen, err := l.waitPredecessors(ctx, pfx, key, rev, trips)
		if err != nil {
			return 0, 0, err
		}
		return rev, seen, nil
	}
	return 0, 0, errors.New("own key keeps reappearing")
}

// waitPredecessors waits until no key under pfx is older than rev, the
// create revision of own (this waiter's key), and returns the revision at
// which it saw that. Each round reads the newest of the older keys and own
// at one revision and watches both from there: the older key's deletion
// starts the next round; own's deletion (the session's lease ended, maybe
// before this wait began: etcd#11456) ends the wait with ErrSessionEnded.
// A watch that etcd refuses because it compacted its history past the
// revision asked for says nothing about the keys: the round starts again
// from a fresh read.
func (l *Locker) waitPredecessors(ctx context.Context, pfx, own string, rev int64, trips *int) (int64, error) {
	older := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	for {
		*trips++
		resp, err := l.client.Txn(ctx).Then(clientv3.OpGet(pfx, older...), clientv3.OpGet(own)).Commit()
		if err != nil {
			return 0, err
		}
		at := resp.Header.Revision
		if mine := resp.Responses[1].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != rev {
			return 0, fmt.Errorf("%w: own key deleted while waiting", ErrSessionEnded)
		}
		prev := resp.Responses[0].GetResponseRange().Kvs
		if len(prev) == 0 {
			return at, nil
		}
		err = l.waitDelete(ctx, string(prev[0].Key), own, at)
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return 0, err
		}
	}
}

// waitDelete returns nil when key is deleted after revision at, and
// ErrSessionEnded when own is. It returns rpctypes.ErrCompacted when etcd
// refuses to watch from at because it compacted its history past it.
func (l *Locker) waitDelete(ctx context.Context, key, own string, at int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kw := l.client.Watch(wctx, key, clientv3.WithRev(at+1))
	ow := l.client.Watch(wctx, own, clientv3.WithRev(at+1))
	for {
		var wr clientv3.WatchResponse
		var ok, mine bool
		select {
		case wr, ok = <-kw:
		case wr, ok = <-ow:
			mine = true
		}
		if !ok {
			if err := context.Cause(ctx); err != nil {
				return err
			}
			return errors.New("watch ended")
		}
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				if mine {
					return fmt.Errorf("%w: own key deleted while waiting", ErrSessionEnded)
				}
				return nil
			}
		}
	}
}

// cleanupTimeout bounds deleting the key of a failed acquisition.
const cleanupTimeout = 2 * time.Second

// giveUp deletes key after a failed acquisition (its put may have been
// applied even if the answer was lost) and then takes the caller out of
// name's local queue. It waits for that at most lock.CleanupWait, even
// when wctx (the caller's budget) has ended, as it has whenever the wait
// ran out: the waiter's key is then certainly there, and a Lock that
// returned with it still queued would hold up the waiters behind it. The
// bound keeps an unresponsive etcd from stretching Lock much past its
// budget; the rest goes on in the background, owned by the Locker. If the
// delete fails, the session is abandoned so that the key goes with its
// lease.
func (l *Locker) giveUp(ctx, wctx context.Context, s *session, name, key string) {
	finished := make(chan struct{})
	l.wg.Go(func() {
		defer close(finished)
		defer l.leaveQueue(name)
		if s.Ctx().Err() != nil {
			return // the key goes with the lease
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := l.client.Delete(cctx, key); err != nil {
			l.abandon(s)
		}
	})
	lock.AwaitCleanup(context.WithoutCancel(wctx), finished)
}

// grant builds the lease for key, created at revision rev and seen still
// held at revision seen, and starts watching for its loss.
func (l *Locker) grant(parent context.Context, s *session, name, key string, rev, seen int64) *Lease {
	lease := &Lease{l: l, sess: s, key: key, watched: make(chan struct{})}
	lease.Init(parent, lock.Grant{Backend: Backend, Key: name, Fence: lock.Fence{Backend: Backend, Token: rev},
		Observer: l.opts.Observer})
	lease.stopSess = context.AfterFunc(s.Ctx(), func() { lease.lose(s.endCause()) })
	go lease.watch(seen)
	return lease
}

// Lease is one successful Lock or TryLock: the proof of holding a lock for
// as long as its Context is not cancelled. Its Fence is the key's create
// revision, larger than every earlier holder's of the same name; its
// Context is cancelled when the session ends or the key is deleted (cause
// wrapping lock.ErrLost and ErrSessionEnded or ErrKeyDeleted).
type Lease struct {
	lock.State
	l        *Locker
	sess     *session
	key      string
	stopSess func() bool
	watched  chan struct{} // closed when watch returns
}

var (
	_ lock.Locker = (*Locker)(nil)
	_ lock.Lease  = (*Lease)(nil)
)

// EtcdKey is the key this lease holds in etcd.
func (l *Lease) EtcdKey() string { return l.key }

// LeaseID is the etcd lease the key is attached to (the Locker's session's).
func (l *Lease) LeaseID() clientv3.LeaseID { return l.sess.Lease() }

// Deadline is when the lease ends on this process's clock unless its
// session's keepalive is answered before: the send time of the last
// answered keepalive (or of the grant) plus the etcd lease's TTL, less the
// drift allowance of lock.ValidUntil. Keepalives go every TTL/3.
func (l *Lease) Deadline() time.Time { return l.sess.Deadline() }

// Err is nil while the lease holds, else why not: the loss (wrapping
// lock.ErrLost) or lock.ErrReleased. A deadline that passed counts even
// before its timer has fired.
func (l *Lease) Err() error {
	if err := l.State.Err(); err != nil {
		return err
	}
	if err := l.sess.overdue(); err != nil {
		return l.LostError("lock", err)
	}
	return nil
}

// watchRetry bounds the wait between reads of a lease's key when etcd
// cannot be read: the session's deadline ends the lease meanwhile if etcd
// is gone for good.
const watchRetry = 500 * time.Millisecond

// watch cancels the lease when its key is deleted, watching it from
// revision seen+1 (seen: a revision at which the key was still there), so
// a deletion before the watch is set up counts. When etcd refuses the
// watch because it compacted its history past that revision (or the watch
// ends without a verdict), the key is read again: still there with the
// same create revision, it is watched from the read's revision; gone (or
// created again), the lease is lost.
func (l *Lease) watch(seen int64) {
	defer close(l.watched)
	ctx := l.Context()
	for {
		if reason := l.watchFrom(ctx, seen); reason != nil {
			l.lose(reason)
			return
		}
		for {
			if ctx.Err() != nil {
				return
			}
			at, reason, err := l.read(ctx)
			if reason != nil {
				l.lose(reason)
				return
			}
			if err == nil {
				seen = at
				break
			}
			t := time.NewTimer(watchRetry)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// watchFrom watches the key from revision seen+1 until it is deleted
// (ErrKeyDeleted), etcd refuses the watch for a reason other than a
// compacted revision (the key presumed lost), or the watch ends without a
// verdict (nil: ctx ended, the revision was compacted, the client closed).
func (l *Lease) watchFrom(ctx context.Context, seen int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range l.l.client.Watch(wctx, l.key, clientv3.WithRev(seen+1)) {
		switch {
		case ctx.Err() != nil, wr.CompactRevision != 0:
			return nil
		case wr.Canceled:
			// Refused: we cannot tell whether the key is still there;
			// presume the worst.
			return fmt.Errorf("%w: watch on own key cancelled: %w", ErrKeyDeleted, wr.Err())
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return ErrKeyDeleted
			}
		}
	}
	return nil
}

// read reads the key: the revision it was read at while still held, or
// the reason it is not (deleted, or a new key of the same name), or err
// when etcd could not be read.
func (l *Lease) read(ctx context.Context) (at int64, reason, err error) {
	resp, err := l.l.client.Get(ctx, l.key)
	if err != nil {
		return 0, nil, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.Fence().Token {
		return 0, fmt.Errorf("%w (found gone when read again)", ErrKeyDeleted), nil
	}
	return resp.Header.Revision, nil, nil
}

// lose marks the lease lost by reason and cancels its context, unless it
// was released or lost first.
func (l *Lease) lose(reason error) { l.Lose(l.LostError("lock", reason)) }

// Release gives the lease up by deleting its key. nil: released.
// lock.ErrLost: the lease had been lost before (the work done under it may
// not have been exclusive). lock.ErrNotHeld: the key was already gone, or
// the lease was already released. lock.ErrReleaseUnknown: the delete's
// outcome is unknown; the session is abandoned, so the key goes within the
// TTL. The lease's context is cancelled in every case.
func (l *Lease) Release(ctx context.Context) error {
	lost, err := l.BeginRelease()
	if err != nil {
		return err
	}
	if lost == nil {
		if over := l.sess.overdue(); over != nil {
			lost = l.LostError("lock", over)
		}
	}
	l.stopSess()
	<-l.watched
	resp, err := l.l.client.Delete(ctx, l.key)
	if err != nil {
		l.l.abandon(l.sess)
	}
	l.l.leaveQueue(l.Key())
	return l.EndRelease(l.ReleaseError(lost, err, err == nil && resp.Deleted == 1))
}
