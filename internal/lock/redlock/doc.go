// Package redlock provides Redlock: one lock held on a majority of N
// independent Redis servers, with a fencing token that does not go
// backwards while a majority of the servers keeps its data.
//
// # Algorithm
//
// Lock makes tries until one wins, for at most Options.Wait and never past
// ctx (then ErrTimeout, wrapping ctx's error and the last try's failure).
// A try runs one script per server: SET key token NX PX ttl, minting a
// fence from a counter kept beside the key on that server (see Fencing).
// Each call is bounded by Options.ServerTimeout, a small fraction of the
// TTL, and the try is decided as soon as a majority (N/2+1) has granted,
// or refused or failed so that no majority is possible: nobody waits for
// the slowest server. The try wins when a majority granted and the
// validity, TTL − elapsed − drift (elapsed counted from before the first
// command, drift = TTL/100 + 2ms for clock rates), is still positive after
// the fence's catch-up below.
//
// Tries are gated: the key's gate server (chosen by the key's hash, the
// same in every process given the servers in the same order) is asked
// first, and the others, in parallel, only if it did not refuse. Asking
// all servers at once, contenders split them (each winning some, none a
// majority, all starting over): in internal/stock's race test (64 buyers,
// two replicas) that timed buyers out, gated it sells like pglock. Waiters
// then poll one server instead of N. Every fourth try of a Lock, and
// TryLock, asks all at once, so a key left on the gate alone cannot block
// the others; a gate that did not answer is passed over for a second.
// Exclusion rests on the majority alone, whatever the order. The price: two
// round trips when the key is free.
//
// And within one process, Lock callers of a key queue for their turn
// (package turn): only one at a time tries the servers, keeping its turn
// while it holds the lock. Without that, the seeds' load (1500 buyers at
// once, 750 per replica, 1000 units) sold 8 units and timed 1492 buyers
// out: 750 contenders per process each polling the gate. With it, see the
// README's table.
//
// One goroutine per server per try sets the key and, unless the server
// refused, deletes it by token (compare-and-delete) after its own set has
// returned, when the try is lost or the lease released; so a lost try's
// clean-up and a release beyond the majority run in the background, and a
// delete never overtakes its set. Release returns once a majority
// confirmed. Between tries a waiter sleeps a random delay, uniform in
// [MinBackoff, a ceiling that doubles up to MaxBackoff].
//
// There is no watchdog and no extend: the lease's Context is cancelled at
// the end of its validity and on Release. The sales this guards take
// milliseconds against a TTL of seconds, and a Redlock extend has to win a
// majority again, on servers one of which may have restarted empty; an
// extend that re-sets a missing key would resurrect a lock that another
// holder may have had meanwhile (redsync's WithSetNXOnExtend does that), one
// that does not is a second acquire with its own failure modes. A holder
// that needs longer takes a longer TTL.
//
// # Fencing
//
// Redlock has no token of its own: the random value is not ordered, and "a
// counter on one Redis node would not be sufficient, because that node may
// fail" (Kleppmann). Here each server keeps a counter per key (a hash
// beside it, key:redlock-fence, in the key's cluster slot), bumped in the
// script that sets the key. The lease's token is the largest value the
// majority that granted it returned; before the lease is handed out, every
// server of that majority whose counter is below the token is raised to it
// (a catch-up script that only acts while our key is still there; in the
// usual case the counters agree and this step is skipped). So when a
// try wins with token t, a majority has counter ≥ t while it holds our
// key; the next winner's majority shares a server with it, whose counter
// it bumps above t after our key is gone from it: tokens strictly increase
// from holder to holder, without consensus, as long as no server of the
// majority loses its data.
//
// A server that restarted empty has no counter. The script then asks for a
// floor: Options.FenceFloor (the stock strategy passes the highest token
// Postgres has seen for the product), and the counter restarts above it;
// without FenceFloor it restarts at 0. The floor keeps tokens above every
// token the database has accepted, but not above a holder's that is still
// in flight, so after a restart two holders can get the same or an older
// token. That is why the protected store must compare strictly (Postgres
// refuses a token not newer than the last it saw) and guard its writes:
// the fence reports a stale holder, the guard prevents the oversell.
//
// # Faults
//
//   - A server down or hung: it costs a try at most ServerTimeout, and
//     only when it is the key's gate (then once a second); with a majority
//     up, Lock still succeeds; with no majority up, Lock times out
//     (ErrTimeout wrapping ErrNoQuorum). A command that a hung server runs
//     after it resumes may leave our key there until its TTL; it is a
//     minority.
//   - A server restarted without data while a lock is held: if the holder
//     held exactly a majority, another client can now win a majority (the
//     empty server and the one the holder lacked) and both believe they
//     hold the lock. Its token comes from the floor and the other
//     counters, so it may equal or precede the first holder's; Postgres
//     lets at most one of them claim the row per token and the guard keeps
//     the stock right (shown in internal/stock's TestRedlockRestartedServer).
//     Redis persistence with fsync always, or restarting a server only
//     after the longest TTL, closes this window (antirez).
//   - A holder paused past its validity: the lease's Context is cancelled
//     when it resumes, and a write it makes anyway carries an older token
//     than the next holder's: the fence refuses it.
//   - A network cut from a minority: as a server down. From the majority:
//     Lock times out; held leases end at their validity.
//   - Clocks: validity is measured on this process's monotonic clock and
//     shortened by the drift allowance; a server whose clock runs fast
//     (Redis expires keys by wall time) ends the key early, which is the
//     same as a restart of that server.
//
// The clients should have ContextTimeoutEnabled set (go-redis ignores
// context deadlines on socket reads otherwise): a hung server's call then
// ends at ServerTimeout instead of the client's ReadTimeout. A try's
// decision never waits longer than ServerTimeout per phase either way.
package redlock
