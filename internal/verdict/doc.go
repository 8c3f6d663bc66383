// Package verdict judges a run of buyers from what they were told and what
// the database holds afterwards, as the design's invariants say: per round
// no unit oversold, the ledger equal to the stock's fall, every 2xx with its
// ledger row (and its Idempotency-Key's only row), no 409 while stock
// remained, and no two lock holders at once.
//
// Every check is a function of readings taken beforehand (Figures, the
// ledger's rows by key, the replicas' holds), so each can be tested without
// a fleet and new checkers join beside them: a check of the history of
// answers against a sequential model of a product (linearizability) is one
// more function over the buyers' operations, with its own verdict. The
// readings from Postgres that the checks need are here too (ReadKeys,
// SoldWithOthers, LedgerByStrategy); the checker never injects or drives
// anything.
package verdict
