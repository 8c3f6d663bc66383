package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"inventory/internal/lock"
)

// session is a Locker's etcd lease, which every key it puts is attached
// to, kept alive here rather than by clientv3's KeepAlive (which
// concurrency.Session uses): that one counts its deadline from the
// arrival of a keepalive's answer plus the whole TTL, so after a slow
// answer, or with this process's clock running slow against the leader's,
// it trusts the lease for a while after etcd may have revoked it. A session
// counts its deadline as redislock and pglock count theirs
// (lock.ValidUntil): from before the request that granted or refreshed the
// lease was sent, less an allowance for drift. Its context ends at that
// deadline unless a keepalive answered meanwhile, when etcd reports the
// lease gone, and when it is abandoned or its Locker closed; the cause
// wraps ErrSessionEnded.
type session struct {
	client *clientv3.Client
	id     clientv3.LeaseID
	ttl    time.Duration // as granted: etcd may raise the TTL asked for

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the keepalive goroutine has exited

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer // ends the session at deadline
}

// keepAliveRetry is the longest a session waits to retry a keepalive that
// failed (its deadline permitting): etcd's own KeepAlive retries after
// 500ms too.
const keepAliveRetry = 500 * time.Millisecond

// grantSession grants a lease of ttl seconds and starts keeping it alive;
// the session's context derives from parent (the Locker's lifetime), and
// its keepalive goroutine counts in wg.
func grantSession(ctx, parent context.Context, client *clientv3.Client, ttl int, wg *sync.WaitGroup) (*session, error) {
	sent := time.Now()
	g, err := client.Grant(ctx, int64(ttl))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	s := &session{client: client, id: g.ID, ttl: time.Duration(g.TTL) * time.Second, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancelCause(parent)
	s.mu.Lock()
	s.deadline = lock.ValidUntil(sent, s.ttl)
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	s.mu.Unlock()
	wg.Go(s.keepAlive)
	return s, nil
}

// Lease is the session's etcd lease.
func (s *session) Lease() clientv3.LeaseID { return s.id }

// Ctx is cancelled when the session ends (cause wrapping ErrSessionEnded).
func (s *session) Ctx() context.Context { return s.ctx }

// endCause is why the session ended, wrapping ErrSessionEnded (nil while
// it lasts).
func (s *session) endCause() error {
	c := context.Cause(s.ctx)
	if c == nil || errors.Is(c, ErrSessionEnded) {
		return c
	}
	return fmt.Errorf("%w: %w", ErrSessionEnded, c)
}

// Deadline is when the session ends unless a keepalive answers before.
func (s *session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// overdue is the session's end if its deadline has passed by now, even if
// the timer has not fired yet (a process resumed after a pause), else nil.
func (s *session) overdue() error {
	if !time.Now().Before(s.Deadline()) {
		return s.expiredError()
	}
	return nil
}

func (s *session) expiredError() error {
	return fmt.Errorf("%w: lease %x: no keepalive answered within its TTL (%v, less drift)", ErrSessionEnded, s.id, s.ttl)
}

// end ends the session with cause (wrapping ErrSessionEnded): no more
// keepalives; etcd ends the lease by its TTL unless revoked.
func (s *session) end(cause error) {
	s.mu.Lock()
	s.timer.Stop()
	s.mu.Unlock()
	s.cancel(cause)
}

// Orphan stops keeping the lease alive, so that it and its keys go within
// the TTL: what a key whose deletion failed needs.
func (s *session) Orphan() { s.end(fmt.Errorf("%w: lease %x abandoned", ErrSessionEnded, s.id)) }

func (s *session) expire() {
	if s.overdue() != nil { // not extended since the timer was set
		s.end(s.expiredError())
	}
}

// extend moves the deadline to until, if later, after a keepalive.
func (s *session) extend(until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil || !until.After(s.deadline) {
		return
	}
	s.deadline = until
	s.timer.Reset(time.Until(until))
}

// keepAlive refreshes the lease every TTL/3 until the session ends; a
// failed refresh is retried sooner, until the deadline ends the session.
func (s *session) keepAlive() {
	defer close(s.done)
	every := s.ttl / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		kctx, cancel := context.WithDeadline(s.ctx, s.Deadline())
		resp, err := s.client.KeepAliveOnce(kctx, s.id)
		cancel()
		switch {
		case err == nil:
			s.extend(lock.ValidUntil(sent, time.Duration(resp.TTL)*time.Second))
			t.Reset(every)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.end(fmt.Errorf("%w: lease %x not found: %w", ErrSessionEnded, s.id, err))
			return
		default:
			t.Reset(min(every, keepAliveRetry))
		}
	}
}
