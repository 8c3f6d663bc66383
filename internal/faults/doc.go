// Package faults injects the faults of the design's vocabulary (replica
// paused or killed, Redis restarted empty or failed over by its Sentinel
// to a replica that missed the latest writes, the master of a product's
// slot in a Redis Cluster failed over the same way, Postgres restarted or
// failed over by Patroni to its synchronous standby, a replica's
// network to Postgres and Redis slowed or cut (through proxies), a COMMIT's
// reply lost after Postgres committed, a lock key
// removed under its holder, a restock or a strategy switch racing the
// buyers, a lock server's clock jumping forward, the expiry job's runner
// paused past its lease) into a running local fleet, one file per fault.
//
// When the buyers hold orders (Target.Orders, the matrix's orders mode),
// the faults of an order's life strike at it: replica-kill while a step
// is in flight, pg-restart and pg-failover once held orders are due (the
// sweep at work), redis-restart with holds outstanding; those that keep
// Postgres or the job's lock away from every replica say for how long
// (Outage), which the job's bound does not cover.
//
// A fault's Scope says how far it reaches: a fault that strikes the whole
// fleet (ScopeFleet) is injected once while every strategy sells its own
// product, side by side; one that acts on a product (ScopeProduct) gets a
// value per run; the rest (ScopeRun) see one run at a time.
//
// A fault that needs the fleet started a way of its own says so
// (FleetNeeds): redis-failover needs the replicas to reach Redis through a
// Sentinel, which the network faults' proxy links cannot stand between,
// redis-cluster-failover the replicas on a Redis Cluster, pg-failover
// Postgres under Patroni, and clock-jump Redis servers under libfaketime,
// so whoever runs the
// faults starts one fleet per set of needs.
//
// A fault that acts on some strategies only says which, before any run
// (Applicable), from the strategies' properties (Strategy: the lock
// backend, Redis, batches, safe), never from a list of names: a fault
// that applies but finds nothing
// to strike when its moment comes reports a miss (ErrMissed, ErrNotStruck),
// never "not applicable", so that its run is tried again rather than its
// cell skipped.
//
// A fault only injects and heals; it never judges. Whoever runs it (the
// load tester's fault matrix) checks the invariants from the database and
// the answers buyers got.
package faults
