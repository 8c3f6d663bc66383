// Package report writes what the load tester and the fault matrix
// measured: the verdict table and the matrix for a terminal, the same
// figures as JSON (the field names are a contract: scripts and the README
// read them), and a self-contained HTML page with charts that opens
// offline. It only formats: the figures come from internal/load, the
// verdicts from internal/verdict.
package report
