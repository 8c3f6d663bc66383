// Package matrix runs the fault matrix: every strategy × every fault of
// internal/faults, a number of faulted runs per cell, each run a load of
// buyers (internal/load) during which the fault is injected once and
// healed, then judged from the ledger and the answers (internal/verdict)
// and tallied into a report.Matrix.
//
// The matrix knows nothing about any single fault: it asks a fault only
// its name, its scope (one product, one run, or the whole fleet, which
// decides whether runs go side by side and share one strike), whether it
// changes the fleet default, and which fleet it needs. Like Jepsen's
// nemesis and checker, the injector never checks and the checks read only
// the database, the answers and the replicas' own records.
package matrix
