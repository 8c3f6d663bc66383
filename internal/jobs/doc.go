// Package jobs runs a periodic job on one replica at a time: every replica
// runs a Runner for the job, the Runners contend for one lock, and the
// holder runs the job every Interval under its lease.
//
// What a Runner guarantees:
//
//   - Each run gets the current lease's Context (cancelled the moment the
//     lease is lost, or when Run's ctx ends) and that lease's fencing
//     token, never an earlier lease's: the job writes the token with its
//     work, so that the storage refuses an ex-runner that slipped past its
//     lease (paused, cut off) and woke up still running.
//   - Runs never overlap in one Runner: a run ends before the next starts
//     and before the lease is given up. One Runner per job per process.
//   - A run that fails (or panics) is logged and counted, and the next
//     one is due an Interval later as usual.
//   - The Runners that do not hold the lock wait in Lock, again and again
//     as its wait budget runs out, so that when the holder stops cleanly
//     (it releases) another runs the job at once, and when it dies (its
//     lease expires on the lock's server) another runs it within
//     TakeoverBound(TTL) while the backend answers.
//   - Run blocks until its ctx ends, then releases the lease and returns;
//     it starts no goroutine of its own.
//
// Exclusion is the lock's: while holders' clocks run at about the same
// rate and none is paused past its TTL, one holder at a time; past those
// limits only the fence keeps an ex-runner's writes out. docs/jobs.md says
// which lock to give a Runner, and how the bound was measured.
package jobs
