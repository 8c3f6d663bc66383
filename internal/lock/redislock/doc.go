// Package redislock provides Redis locks that tell their holder the moment
// it loses the lock: Mutex (SET NX PX with a token, released by
// compare-and-delete; a watchdog if asked for), Reentrant (a hash
// {owner → count} whose owner travels in the context; always a watchdog)
// and Fair (waiters queue in arrival order and are woken in turn). SetNX is
// the seeds' naive lock, kept only to show how a lock breaks.
//
// Every lease is a lock.Lease. Its fence comes from a counter beside the
// key (Fair's from one of its own), restarted above Options.FenceFloor
// when Redis lost it, so tokens do not go backwards. Its Context is
// cancelled when a watchdog renewal finds the key gone or not ours (within
// TTL/3), when the local validity deadline (TTL less a drift allowance,
// from before the acquiring command) passes unrenewed, or at
// Options.MaxHold. Every acquire, renew and release is one Lua script that
// checks the hold's token and is safe to re-send; waiters are woken by
// release notices over pub/sub, with timed retries for lost ones. A
// Mutex's and a Reentrant's Lock calls of one key in one process take
// turns in memory (package localqueue), so one of them contends in Redis.
//
// Exclusion holds among processes that use one Redis primary, whose clocks
// run at about the same rate and that are not paused past their lease; a
// failover or a pause can let two holders in, and the fence lets the
// storage refuse the stale one. docs/locks.md has the design (waiting,
// fencing, re-sent commands, faults, the Redis layout).
package redislock
