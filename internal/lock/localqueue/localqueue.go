// Package localqueue queues, per lock name, the callers of one process
// that want the same distributed lock, so that only the first of them
// contends for it with other processes.
//
// A distributed lock whose waiters poll (a lock table row, a Redlock
// majority) costs every waiter a round trip per try, and the waiters of
// one process only compete with each other for nothing: whichever of them
// wins, the process holds the lock. With Queues in front, the waiters of a
// process queue here, in memory, and only the first in the queue talks to
// the lock's servers; it stays first while it holds the lock, so the next
// local waiter tries the moment the lock is released here, and is usually
// granted at its first try.
package localqueue

import (
	"context"
	"sync"
)

// Queues keeps one queue per lock name. The zero value is ready to use;
// it is safe for concurrent use.
type Queues struct {
	mu    sync.Mutex
	names map[string]*queue
}

// queue is one name's queue: a token in a channel of one, held by the
// caller first in the queue, and how many callers are in it (the queue is
// dropped at 0).
type queue struct {
	first chan struct{}
	users int
}

// Wait blocks until the caller is first in name's queue, or ctx ends
// (then it returns ctx.Err()). After a nil error the caller must call
// leave exactly once, when it no longer contends for or holds the lock.
func (q *Queues) Wait(ctx context.Context, name string) (leave func(), err error) {
	q.mu.Lock()
	if q.names == nil {
		q.names = map[string]*queue{}
	}
	n := q.names[name]
	if n == nil {
		n = &queue{first: make(chan struct{}, 1)}
		q.names[name] = n
	}
	n.users++
	q.mu.Unlock()
	select {
	case n.first <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-n.first; q.drop(name, n) }) }, nil
	case <-ctx.Done():
		q.drop(name, n)
		return nil, ctx.Err()
	}
}

func (q *Queues) drop(name string, n *queue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n.users--; n.users == 0 {
		delete(q.names, name)
	}
}

// Len is how many names have a queue: a caller first in it or waiting.
func (q *Queues) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.names)
}
