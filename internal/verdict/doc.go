// Package verdict judges a run of buyers, and a cell of the fault matrix,
// from evidence alone: Judge takes everything one run left (each product's
// answers and its state before and after, read from Postgres; the check of
// the history of answers; the ledger's rows by Idempotency-Key; the
// circuits the watchdog opened; the fault's strike and the wave of buyers
// after its heal) and returns the verdict and every reason, and JudgeCell
// does the same for a cell's runs. Both are pure functions: whoever runs
// the buyers or injects the faults (internal/load, internal/faults/matrix)
// only collects, and internal/report only shows.
//
// A run cannot pass what it did not check: a safe row whose history was
// not checked to the end is INCONCLUSIVE, one that sold nothing once its
// fault had healed is STUCK, and a cell whose fault did not strike, or did
// not show the effect it declares, is DID NOT STRIKE; all of them fail.
package verdict
