// Package redlock provides Redlock: one lock held on a majority of N
// independent Redis servers, with a fencing token that does not go
// backwards while a majority of the servers keeps its data.
//
// A try sets the key with a fresh token on the servers (the key's gate
// server first), each call bounded by Options.ServerTimeout, and wins when
// a majority granted with validity left: TTL less the round's time and a
// drift allowance. The lease's fence is the largest counter value of the
// granting majority, which is brought up to it before the lease is handed
// out. Nothing renews a lease: its Context is cancelled when its validity
// ends. Lock callers of one key in one process queue in memory (package localqueue).
//
// A server restarted empty while a lock is held can let a second holder in
// with a fence no newer than the first's, so the protected store must
// compare fences strictly and guard its writes. The clients should have
// ContextTimeoutEnabled set. docs/locks.md has the algorithm, the fencing
// argument and the faults.
package redlock
