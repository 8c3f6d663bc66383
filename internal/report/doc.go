// Package report writes what the load tester and the fault matrix
// measured: the verdict table and the matrix for a terminal, the same
// figures as JSON (the field names are a contract: scripts and the README
// read them), and a self-contained HTML page that opens offline: the
// verdict table and the run's settings first, then the charts, and the
// fault matrix as a table of labelled cells. It only formats: the figures
// come from internal/load, the verdicts from internal/verdict.
package report
