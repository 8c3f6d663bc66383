// Package stock sells units of a product without overselling, by one of
// several named strategies, and shows which of them break.
//
// Postgres is the source of truth: every sale decrements stock and writes one
// ledger row in the same transaction. The strategies differ only in how they
// keep concurrent buyers from selling the same units twice; the lock
// strategies deliberately keep the classic unguarded read-check-update inside
// the lock, so that a broken lock shows up as oversell instead of being
// masked by the database.
package stock
