// Package turn queues the callers of one process that want the same lock,
// so that only one of them at a time contends for it with other processes.
//
// A distributed lock whose waiters poll (a lock table row, a Redlock
// majority) costs every waiter a round trip per try, and the waiters of
// one process only compete with each other for nothing: whichever of them
// wins, the process holds the lock. With a Turns in front, the waiters of a
// process queue here, in memory, and only the one whose turn it is talks
// to the lock's servers; it keeps its turn while it holds the lock, so the
// next local waiter tries the moment the lock is released here, and is
// usually granted at its first try.
package turn

import (
	"context"
	"sync"
)

// Turns hands out turns per name. The zero value is ready to use; it is
// safe for concurrent use.
type Turns struct {
	mu    sync.Mutex
	names map[string]*queue
}

// queue is one name's turn: a token in a channel of one, and how many
// callers hold or wait for it (the queue is dropped at 0).
type queue struct {
	turn  chan struct{}
	users int
}

// Wait blocks until it is the caller's turn for name, or ctx ends (then it
// returns ctx.Err()). After a nil error the caller must call done exactly
// once, when it no longer contends for or holds the lock.
func (t *Turns) Wait(ctx context.Context, name string) (done func(), err error) {
	t.mu.Lock()
	if t.names == nil {
		t.names = map[string]*queue{}
	}
	q := t.names[name]
	if q == nil {
		q = &queue{turn: make(chan struct{}, 1)}
		t.names[name] = q
	}
	q.users++
	t.mu.Unlock()
	select {
	case q.turn <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-q.turn; t.drop(name, q) }) }, nil
	case <-ctx.Done():
		t.drop(name, q)
		return nil, ctx.Err()
	}
}

func (t *Turns) drop(name string, q *queue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q.users--; q.users == 0 {
		delete(t.names, name)
	}
}

// Len is how many names have a caller holding or waiting for a turn.
func (t *Turns) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.names)
}
