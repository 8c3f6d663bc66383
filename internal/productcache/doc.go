// Package productcache serves the anonymous read of a product (GET
// /products/{id}) from an entry the replicas share in Redis, refreshed so
// that a crowd of readers cannot stampede Postgres when the entry expires
// (cache breakdown, 缓存击穿).
//
// What it guarantees, in the default mode (Lock):
//
//   - An answer shows the product as Postgres had it less than Options.TTL
//     before this replica looked the entry up: every entry carries its age,
//     counted from before the Postgres read that made it, on Redis's clock
//     (the entry's remaining PX), so replicas' clocks do not matter.
//   - For the first half of its life an entry is served as it is. In the
//     second half the first reader to see it takes the product's refresh
//     lock (TryLock, never waiting) and reads Postgres while every other
//     reader keeps answering the entry, which is still within the bound.
//   - On a miss (no entry: never read, expired while nobody read, dropped
//     by a restock, or lost by Redis) one reader takes the lock and reads
//     Postgres; the others wait for its entry at most Options.Wait, then
//     read Postgres themselves.
//   - In each replica, concurrent reads of one product share one lookup:
//     one Redis round trip, and at most one Postgres read, for all of them.
//     So a miss costs one Postgres read per product in the whole fleet,
//     plus one per replica whose wait ran out.
//   - Redis failing never fails a read: it is answered from Postgres
//     (still one read per replica for all its concurrent readers).
//   - A restock's Drop deletes the entry after the restock's commit and
//     forbids entries of older rounds, so a refresh that read Postgres
//     before the commit cannot bring the old round back.
//
// The lock only keeps the crowd off Postgres; it decides nothing. Two
// refreshes of one entry (a lock that expired under a slow read) only write
// it twice, each with its own honest age. Sales never read through here.
//
// NoLock is the naive cache-aside, kept to show the stampede: every reader
// that misses reads Postgres and writes the entry. Off reads Postgres every
// time. docs/caching.md has the design and the measured stampede.
package productcache
