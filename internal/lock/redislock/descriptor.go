package redislock

import (
	"context"
	"slices"
	"sync"

	"inventory/internal/lock"
	"inventory/internal/lock/backend"
)

// Kinds of lock the Descriptor's Lockers make besides the plain one (""),
// a Mutex without a watchdog, bounded by its lease time.
const (
	// KindReentrant is a Reentrant lock (it always has a watchdog).
	KindReentrant = "reentrant"
	// KindFair is a Fair lock with a watchdog, which keeps a slow holder's
	// lock while a crowd queues and tells it within TTL/3 that its key is
	// gone.
	KindFair = "fair"
	// KindSetNX is the seeds' naive lock (SetNX): no token, no fence, no
	// watchdog. Unsafe, kept to show how a lock breaks.
	KindSetNX = "setnx"
)

// Descriptor describes redislock to the service: its locks live in the
// service's own Redis (one server, a Sentinel's or a Redis Cluster), so it
// needs no setting and is always open. Its fencing counters live in Redis
// beside each key, restarted above what Postgres has seen when Redis
// loses them (Config.FenceFloor): Backend for the plain and reentrant
// locks, FairBackend for the fair one.
var Descriptor = backend.Descriptor{
	Name:   Backend,
	Fences: []string{Backend, FairBackend},
	Open: func(_ context.Context, c backend.Config) (backend.Lockers, error) {
		return &opened{c: c}, nil
	},
}

// opened is the Descriptor's open backend: it makes lockers, all on the
// service's Redis, and closes them.
type opened struct {
	c      backend.Config
	mu     sync.Mutex
	closes []func()
}

func (l *opened) Locker(kind string) (lock.Locker, error) {
	opts := func(counter string, watchdog bool) Options {
		return Options{Options: l.c.Options, Watchdog: watchdog, FenceFloor: l.c.Floor(counter)}
	}
	var lk interface {
		lock.Locker
		Close()
	}
	switch kind {
	case "":
		lk = NewMutex(l.c.Redis, opts(Backend, false))
	case KindReentrant:
		lk = NewReentrant(l.c.Redis, opts(Backend, true))
	case KindFair:
		lk = NewFair(l.c.Redis, opts(FairBackend, true))
	case KindSetNX:
		return NewSetNX(l.c.Redis, Options{Options: l.c.Options}).Locker(), nil
	default:
		return nil, backend.UnknownKind(Backend, kind, KindReentrant, KindFair, KindSetNX)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closes = append(l.closes, lk.Close)
	return lk, nil
}

// Close closes the lockers made, the last first.
func (l *opened) Close() {
	l.mu.Lock()
	closes := slices.Clone(l.closes)
	l.closes = nil
	l.mu.Unlock()
	for _, c := range slices.Backward(closes) {
		c()
	}
}
