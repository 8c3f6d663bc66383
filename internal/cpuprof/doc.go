// Package cpuprof measures where a request's CPU goes on a fleet running
// on this machine: it drives one kind of request at a time (GET /healthz,
// a sold-out answer, a sale by one strategy) with closed-loop keep-alive
// clients through nginx, as wrk does, and reads every process's CPU from
// /proc before and after a fixed window — Postgres with its backends,
// each replica, nginx with its workers, Redis, the fleet's other servers,
// and the load generator itself — so that a table can say how many
// microseconds of CPU each answer cost in each process.
//
// What it guarantees: every process of the fleet that ran during the
// window is counted in exactly one group, by the process it descends
// from (the measuring process as the generator, its own threads only); a
// child that exited during the window is still counted, through its
// parent's cutime and cstime (a Postgres backend that a pool closed); CPU
// is read in clock ticks (USER_HZ, 10 ms), so a window should be long
// enough that its answers make a tick small beside each one's cost.
package cpuprof
