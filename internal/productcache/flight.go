package productcache

import "sync"

// flights lets the concurrent reads of one product in this replica share one
// lookup: the first (the leader) makes it, the others wait for its result.
// It is singleflight with two more things this cache needs: the caller
// knows whether it led (only the leader's answer counts as a Redis or
// Postgres read), and a restock can forget a lookup in flight, so that a
// read that starts after the restock answered never joins a lookup that
// started before it.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one lookup; done is closed once read and err are set.
type flight struct {
	done chan struct{}
	read Read
	err  error
	// joined counts the reads that joined it, under flights.mu.
	joined int
}

// join returns id's lookup in flight, or starts one: leader is true for
// the caller that must make it and then call land.
func (fs *flights) join(id string) (f *flight, leader bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[id]; f != nil {
		f.joined++
		return f, false
	}
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	f = &flight{done: make(chan struct{})}
	fs.m[id] = f
	return f, true
}

// land publishes f's result to those waiting on it and retires it, unless
// forget has already replaced it.
func (fs *flights) land(id string, f *flight, read Read, err error) {
	f.read, f.err = read, err
	fs.mu.Lock()
	if fs.m[id] == f {
		delete(fs.m, id)
	}
	fs.mu.Unlock()
	close(f.done)
}

// forget makes the next read of id start a lookup of its own; the readers
// already waiting on the one in flight still get its result.
func (fs *flights) forget(id string) {
	fs.mu.Lock()
	delete(fs.m, id)
	fs.mu.Unlock()
}

// waiting is how many reads joined id's lookup in flight (0: none in
// flight), for a test to wait on.
func (fs *flights) waiting(id string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[id]; f != nil {
		return f.joined
	}
	return 0
}
