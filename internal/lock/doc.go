// Package lock provides Redis locks that tell their holder the moment it
// loses the lock: a Mutex (SET NX PX, compare-and-delete) and a Reentrant
// lock (a hash {owner → count}, owner carried in the context), each with
// fencing tokens, an optional (Mutex) or built-in (Reentrant) watchdog, and
// a Lease whose Context is cancelled when the lock is known or presumed lost.
//
// It knows nothing about what it protects. The documentation of guarantees,
// limits and measured figures follows in this file.
package lock
