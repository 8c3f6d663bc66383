// Package memlock is the smallest lock backend: an example of what adding
// one takes (docs/adding-a-backend.md), registered only in tests. Its
// "server" is a Server in this process's memory, shared by the Lockers
// made on it as a Redis is shared by the replicas: one holder per key,
// leases that end at their TTL, a fencing counter per key that only grows,
// and a watch that ends a lease the moment the server lets it go
// (Server.Expire). It keeps nothing across processes, so it excludes
// only the Lockers of one Server: never the service's lock.
package memlock

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"inventory/internal/lock"
)

// Backend names this package in errors and fences.
const Backend = "memlock"

// Server keeps the locks: for each key its holder (if any) and its
// fencing counter. The zero value is not usable; see NewServer.
type Server struct {
	mu     sync.Mutex
	held   map[string]*hold
	fences map[string]int64
	// freed is closed and replaced whenever a key is let go, waking the
	// waiters to try again.
	freed chan struct{}
}

// hold is a key's holder on the server.
type hold struct {
	token string
	timer *time.Timer // lets the key go at the lease's TTL
	lease *Lease      // told at once when the server lets the key go
}

// NewServer returns an empty Server.
func NewServer() *Server {
	return &Server{held: map[string]*hold{}, fences: map[string]int64{}, freed: make(chan struct{})}
}

// Expire lets key's holder go now, as if its lease had run out early, and
// reports whether the key was held. The holder's lease is lost at once.
func (s *Server) Expire(key string) bool {
	s.mu.Lock()
	h := s.held[key]
	if h != nil {
		s.letGoLocked(key, h)
	}
	s.mu.Unlock()
	if h != nil {
		h.lease.Lose(h.lease.LostError("lock", fmt.Errorf("%w: the server let it go", lock.ErrExpired)))
	}
	return h != nil
}

// Holder returns key's holder's token, or false when nobody holds it.
func (s *Server) Holder(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[key]; h != nil {
		return h.token, true
	}
	return "", false
}

// letGoLocked frees key from h and wakes the waiters; s.mu is held.
func (s *Server) letGoLocked(key string, h *hold) {
	h.timer.Stop()
	delete(s.held, key)
	close(s.freed)
	s.freed = make(chan struct{})
}

// take grants key to a new hold lasting ttl, with the next fencing token,
// or reports it held and returns a channel closed at the next release.
func (s *Server) take(key string, ttl time.Duration, grant func(token string, fence int64) *Lease) (*Lease, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] != nil {
		return nil, s.freed
	}
	s.fences[key]++
	h := &hold{token: rand.Text()}
	h.lease = grant(h.token, s.fences[key])
	s.held[key] = h
	h.timer = time.AfterFunc(ttl, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.held[key] == h {
			s.letGoLocked(key, h)
		}
	})
	return h.lease, nil
}

// release frees key if token still holds it, and reports whether it did.
func (s *Server) release(key, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil || h.token != token {
		return false
	}
	s.letGoLocked(key, h)
	return true
}

// Locker takes locks on a Server; it is safe for concurrent use.
type Locker struct {
	s    *Server
	opts lock.Options
}

// New returns a Locker on s with opts' TTL, Wait and Observer (their
// defaults when zero).
func New(s *Server, opts lock.Options) *Locker {
	return &Locker{s: s, opts: opts.WithDefaults()}
}

// Lock acquires key, waiting for a release while it is held, for at most
// the Wait budget and never past ctx.
func (l *Locker) Lock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, key, "lock", true, l.attempt)
}

// TryLock makes one attempt: lock.ErrNotAcquired when key is held.
func (l *Locker) TryLock(ctx context.Context, key string) (lock.Lease, error) {
	return lock.Acquire(ctx, l.opts.Observer, key, "trylock", false, l.attempt)
}

func (l *Locker) attempt(ctx context.Context, key, op string, wait bool, trips *int) (*Lease, error) {
	wctx, cancel := l.opts.WaitContext(ctx, wait)
	defer cancel()
	for {
		if err := wctx.Err(); err != nil {
			return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: fmt.Errorf("%w: %w", lock.ErrTimeout, err)}
		}
		*trips++
		sent := time.Now()
		lease, freed := l.s.take(key, l.opts.TTL, func(token string, fence int64) *Lease {
			lease := &Lease{l: l, token: token}
			lease.Init(ctx, lock.Grant{Backend: Backend, Key: key, Fence: lock.Fence{Backend: Backend, Token: fence}, Observer: l.opts.Observer})
			lease.ExpireAt(lock.ValidUntil(sent, l.opts.TTL), nil)
			return lease
		})
		if lease != nil {
			return lease, nil
		}
		if !wait {
			return nil, &lock.Error{Backend: Backend, Op: op, Key: key, Err: lock.ErrNotAcquired}
		}
		select {
		case <-freed:
		case <-wctx.Done():
		}
	}
}

// Lease is one hold of a key on the Server.
type Lease struct {
	lock.State
	l     *Locker
	token string
}

// Release gives the key up: nil, or lock.ErrLost when the lease had been
// lost before, lock.ErrNotHeld when the server no longer had this hold.
func (le *Lease) Release(context.Context) error {
	lost, err := le.BeginRelease()
	if err != nil {
		return err
	}
	return le.EndRelease(le.ReleaseError(lost, nil, le.l.s.release(le.Key(), le.token)))
}

var (
	_ lock.Locker = (*Locker)(nil)
	_ lock.Lease  = (*Lease)(nil)
)
