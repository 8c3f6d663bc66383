// Package results keeps the project's measured runs as data and writes the
// tables of docs/ from them, so that a doc states the current figures once
// and cannot drift from what was measured.
//
// Each kind of measurement is one JSON Lines file under docs/results/
// (throughput per strategy, ceilings, lock benchmarks, fault matrices,
// make test durations, …): one Record per run, with its date, the commit
// it measured, the machine (cores, load, what ran beside it), the command
// that reproduces it and its figures as a table. Records are only ever
// appended; history is the file.
//
// A doc shows a record between two markers:
//
//	<!-- results batching.jsonl select=strategy:batch,atomic columns=strategy,sales_per_s -->
//	(generated: the table, the date, commit and machine, the command)
//	<!-- /results -->
//
// Update rewrites what lies between them from the newest matching record;
// docs/docs_test.go fails when a doc and its records differ. FromLoadtest
// and FromMatrix turn what `loadtest --json` and `loadtest faults --json`
// wrote into a Record's rows, which is how `loadtest results record`
// appends a new run.
package results
