// Package stock sells units of a product without overselling, by one of
// several named strategies, and shows which of them break.
//
// Postgres is the source of truth and has the last word: every sale
// decrements stock and writes one ledger row in the same transaction, and
// every safe strategy's write is guarded (it never takes stock below zero).
// The strategies differ in how they keep concurrent buyers from selling the
// same units. The lock strategies serialise them with a lock.Locker each
// (Deps.Lockers: Redis, Redlock, etcd, ZooKeeper or a Postgres table), and
// the safe ones sell through one fenced sale (fencedSale) that also fences the write
// with the lock's token, so a broken lock is caught by Postgres and
// reported as a breach (ErrLockBreach) rather than an oversell. Only the
// unsafe strategies (none, local, setnx) write unguarded, to show how
// overselling happens. Each sale's ledger row carries the round whose
// stock it decremented, so a restock racing in-flight sales leaves every
// round consistent on its own.
package stock
