// Package redislock provides Redis locks that tell their holder the moment it
// loses the lock.
//
// Three kinds share one Lease type:
//
//   - Mutex: SET key token NX PX ttl (inside a script that also mints the
//     fencing token), released by compare-and-delete. No watchdog unless
//     Options.Watchdog: the lease then simply ends at its TTL.
//   - Reentrant: a Redis hash {owner → hold count}. The owner travels in the
//     context (WithOwner), so nested code of one request re-enters and
//     increments instead of deadlocking; each release decrements, the last
//     one deletes the key. A watchdog always renews it.
//   - Fair: first come, first served. Waiters queue in arrival order and
//     each is woken, by a notice naming it, when its turn comes; see
//     "Fair" below.
//
// SetNX is the seeds' naive lock (SETNX, then PEXPIRE, unconditional DEL,
// no token, no lease), kept only so the unsafe setnx strategy can show how
// a lock breaks; its doc says how. The lock table in Postgres lives in
// package pglock, which does not import Redis.
//
// A Lease carries the fencing token (Fence), the local validity deadline
// (Deadline) and a Context derived from the caller's that is cancelled the
// moment the lock is known or presumed lost. Run the protected work under
// lease.Context() and write lease.Fence() with the data; Release afterwards.
//
// # Guarantees
//
// Exclusion. At most one lease per key is valid at a time, among processes
// that use one Redis primary, whose clocks run at about the same rate, and
// that are not paused (see below). Every acquire, renew and release is one
// atomic Lua script that checks the hold's random token, so nobody extends
// or frees a hold that is not theirs.
//
// Every lock key always has a TTL (it is created with PX, or HSET and
// PEXPIRE in the same script). Keys are Redis-Cluster safe: the fencing
// counter of "lock:{sku-1}" is "lock:{sku-1}:fence" (same hash tag); a key
// without a tag gets "{key}:fence".
//
// Being told. The lease's local validity deadline is measured on the
// monotonic clock from before the acquiring (or renewing) command was sent,
// less TTL/100+2ms for clock drift, so it ends before Redis' TTL does. The
// lease context is cancelled, with a cause *Error wrapping ErrLost, when:
//
//   - a renewal or re-entry finds the key gone or carrying another token
//     (ErrNotHeld; LostReason "not_owner"): detected within TTL/3;
//   - the validity deadline passes without a successful renewal: Redis
//     unreachable or stopped, or no watchdog (ErrExpired; "expired");
//   - Options.MaxHold has passed since the acquisition (ErrMaxHold);
//
// and on Release (cause ErrReleased). Lease.Err says the same without a
// context. Pass the context to the Postgres transaction: a lost lock rolls
// the sale back instead of committing it.
//
// Watchdog. One goroutine per held lock (per outermost Reentrant hold),
// started when Redis granted the hold and owned by it. It renews every TTL/3
// only while the key still carries the hold's token; a "not ours" reply is
// terminal and it never re-acquires (so it cannot resurrect a lock after a
// Redis restart, failover or deletion). Transient errors are retried with
// backoff until the validity deadline. Release stops it synchronously at its
// start and waits for it to exit before sending the release command, so it
// never outlives the lock, and a later hold of the same key is not renewed
// by an earlier one. (A renewal already in flight is waited for: with a hung
// Redis that is bounded by the client's ReadTimeout, as the release command
// itself is.)
//
// Fencing. Each acquisition mints a token with HINCRBY in the same script
// that takes the lock: strictly increasing per key, equal for the nested
// re-entries of one Reentrant hold. The counter has no TTL. When it is
// missing (first use, or Redis lost its data) the script answers "need a
// floor" without locking, the lock asks Options.FenceFloor (e.g. the
// highest fence Postgres has stored) and runs again, so tokens never go
// backwards; the usual path stays one round trip. Without FenceFloor a lost
// counter restarts at 1. Tokens are exact up to 2^53 (Lua numbers).
//
// Re-sent commands. go-redis retries a command whose reply was lost
// (MaxRetries, default 3), so a script may run twice. Each one is safe to
// re-run: acquire recognises its own token and returns the fence it minted,
// re-entry and nested release carry an operation id and apply once, and a
// release leaves its token as a tombstone in the fence hash so that a
// re-sent release still reports success. An acquire whose outcome is
// unknown (network error) deletes its key by token before Lock returns
// (best effort, up to 2s), so it leaves no orphan and no goroutine.
//
// Waiting. A Lock that finds the key held waits for the holder's release
// instead of sleep-polling. The release scripts (Mutex release, Reentrant's
// last release, and the cleanup after an acquire of unknown outcome)
// PUBLISH on the key's release channel, "lock:{sku-1}:released" (same
// hash tag as the key). Each Mutex or Reentrant value keeps one pub/sub
// connection, opened when its first waiter needs it and closed after 2s
// without waiters (or by Close), and subscribes the channels of the keys
// it has waiters on; the channel stays subscribed for 2s after its last
// waiter, so steady contention does not re-subscribe. A waiter tries once,
// joins (after the subscription is confirmed, or at once if it already
// was, it tries again, so a release between its try and its joining is
// not missed), then parks. Each notice wakes one parked waiter of the
// process, the longest parked; the others stay parked (no thundering
// herd). With two processes a release wakes one waiter in each and one of
// them wins; the loser parks again. A notice that comes while every local
// waiter is busy trying is kept for the next one to park.
//
// Pub/sub rather than a blocking list pop per lock: BLPOP needs a
// connection per blocked waiter (hundreds of waiters, hundreds of
// connections) or a hand-off protocol that keeps the list consistent with
// the key through expiries and Redis restarts; a PUBLISH costs the release
// one command in the same script, loses nothing of the lock's safety (it
// only tells waiters when to try; the acquire script still decides), and
// is fire-and-forget, which is why polling stays as the fallback.
//
// Lost notices. A notice is lost when the subscriber's connection drops
// (go-redis reconnects and subscribes again; on the re-confirmation one
// waiter per channel tries at once), or when the key goes without a
// release: it expires (a holder paused or gone) or is deleted behind the
// lock's back. So every parked waiter also has a timed retry: after a
// jittered [½, 1] × Options.PollInterval (default 1s; with more than 10
// waiters on the key in the process, proportionally longer, so they make
// about 10 retries per interval in all), and no later than just after the
// holder's remaining TTL as the failed try reported it. Options.PollOnly
// turns notices off: waiters then retry with exponential backoff and full
// jitter between MinBackoff and MaxBackoff (1ms–32ms), as before notices
// existed.
//
// Either way Lock waits for at most Options.Wait and never past ctx; it
// makes a last try just before the budget ends rather than giving up early,
// and never spins. Giving up returns ErrTimeout wrapping ctx.Err()
// (context.Canceled or context.DeadlineExceeded), never a generic "retries
// exhausted". TryLock tries once and never subscribes.
//
// Errors. Every error is an *Error carrying the operation and the key, and
// wraps one of: ErrNotAcquired (contention), ErrTimeout (plus the context
// error), ErrLost (plus the reason), ErrNotHeld, ErrReleaseUnknown (the
// release's outcome is unknown: the key expires by its TTL at the latest),
// ErrNoOwner, ErrInvalidKey, or the Redis error.
//
// Metrics. Options.Observer sees each acquisition (outcome, wait, Redis
// round trips), each renewal, each loss (LostReason gives a label) and each
// release with the hold time.
//
// # What it does not cover
//
// A process pause longer than the remaining validity — a GC pause, SIGSTOP,
// a VM freeze, a laptop lid — pauses the watchdog and the deadline timer
// with it. Redis expires the key, another holder takes it, and when the
// paused process resumes its lease context is cancelled at once, but code
// already past its last check (a COMMIT in flight) still acts: two holders
// can then write. Context cancellation narrows this window; only a fencing
// check at the storage closes it. Check the fence before reading, not only
// at the final write: claim the record with lease.Fence() first (e.g.
// UPDATE ... SET fence = $t WHERE fence < $t, which also takes the row lock),
// so that a stale holder's write still in flight is waited for and seen, and
// its later writes find the newer fence. A read followed by a fenced write
// can still act on a value a stale transaction is about to change.
//
// A Mutex without a watchdog learns of a loss (key deleted, Redis restarted)
// only at its validity deadline; with a watchdog, within TTL/3.
//
// One Redis primary only: with asynchronous replication a failover can lose
// a granted lock (and the fence counter, hence FenceFloor). This is not
// Redlock. Redis' own clock matters too: a Redis host whose clock jumps
// expires keys early, which looks like a deletion (detected within TTL/3).
//
// The Mutex and Reentrant are not fair (Fair is): a notice wakes the longest-parked waiter of each process,
// but a holder that releases and locks again at once (or a newcomer's first
// try) can win before the woken waiter's try arrives, and the waiters of
// two processes race. No waiter gives up before its Wait budget.
//
// Owners are scoped to one Reentrant value: the same owner name used through
// two of them (or two processes) contends rather than re-entering. (A Mutex
// and a Reentrant lock on the same key do exclude each other and share its
// fencing counter, so strategies can be switched per request.)
// A lease that is never released keeps its watchdog renewing until
// Options.MaxHold (if set): always Release.
//
// # Fair
//
// Acquire is one script: drop the queue entries whose lease has run out;
// grant the lock (SET holder PX TTL, with a token from the Fair lock's own
// fencing counter, FenceFloor as above) when it is free and the queue is
// empty or starts with us; else take a place at the tail (a ticket from a
// counter, in a sorted set) or, if we have one, refresh its lease. A waiter
// is never passed: a newcomer or a holder locking again queues behind it,
// and TryLock fails while anyone queues. Release deletes the holder by
// token and PUBLISHes the token of the new head on the lock's wake
// channel; the notifier wakes that waiter only (one subscription per
// process and key, as for the Mutex). A waiter that gives up (Wait, ctx)
// leaves the queue in the same way, waking the next if the lock is free.
//
// Server clock. Each queue entry carries a lease that expires on Redis'
// clock (TIME inside the scripts), 3 × PollInterval: the live waiter
// refreshes it with every re-check, about once per PollInterval, and the
// next acquire or release drops an entry whose lease ran out, and reminds
// the new head if the lock is free. No client's clock is compared with
// another's (Redisson's RFairLock passes the client's time and drifts).
//
// Faults. A waiter killed or paused past its lease: dropped, the queue
// goes on (a paused one that resumes queues again at the tail). The head's
// notice lost (subscriber reconnecting): it re-checks within PollInterval,
// or just after the holder's TTL when the holder key expires unreleased;
// any other acquirer that finds the lock free reminds it. Redis restarted
// empty: the holder's lease is lost as a Mutex's (watchdog: within TTL/3);
// the waiters' next re-checks queue them again (arrival order is then the
// order of those re-checks) and the first gets a token above FenceFloor.
// A failover can lose the queue and the holder alike; the fence still
// holds. The holder's lease is the Mutex's (TTL, Options.Watchdog,
// MaxHold).
//
// Cost: uncontended, one round trip to acquire and one to release, as the
// Mutex. A waiter makes about one re-check per PollInterval, so N waiters
// on a key cost N scripts per second. Measured with BenchmarkLockRelease
// (go test -run '^$' -bench '^BenchmarkLockRelease$' -benchtime=2s
// ./internal/lock/redislock/), Mutex and Fair in the same runs, two clients, default
// Options; three runs on 2026-11-23 with other builds on the two cores
// (load average 4–7), so ranges:
//
//	                          acq/s      p50 wait     p99 wait      max wait
//	1 g, no work     Mutex    3.7k–6.8k  42–43 µs     0.3–2.5 ms    31–51 ms
//	                 Fair     4.3k–7.2k  46–47 µs     0.25–1.6 ms   28–99 ms
//	32 g, no work    Mutex    2.9k–3.4k  0.43–0.53 ms 88–136 ms     0.33–0.51 s
//	                 Fair     1.7k–2.6k  10–17 ms     25–43 ms      34–89 ms
//	32 g, 1ms work   Mutex    430–512    0.4–22 ms    1.2–1.27 s    2.2–2.9 s
//	                 Fair     401–595    51–73 ms     78–135 ms     79–136 ms
//
// A FIFO queue keeps the longest wait near the p99 (each waiter waits for
// the ones ahead of it, about 31 hand-overs); the Mutex's median is lower
// because a releaser re-locks at once, paid for by waiters that lose the
// race again and again (its max is 2–20 × the Fair lock's). With an empty
// critical section the hand-over to another goroutine costs the Fair lock
// throughput that the Mutex's barging saves.
//
// # Redis layout
//
//	lock:{sku-1}        Mutex: string "<token>:<fence>", PX TTL
//	                    Reentrant: hash {<owner>: count, "\x00tok": token,
//	                    "\x00fence": fence, "\x00op": last operation id}, PX TTL
//	lock:{sku-1}:fence  hash {n: last fence, rel: last released token}, no TTL
//	lock:{sku-1}:released  pub/sub channel: an empty message per release
//	lock:{sku-1}:fair        Fair holder: string "<token>:<fence>", PX TTL
//	lock:{sku-1}:fair:queue  Fair waiters: zset token → ticket (arrival order)
//	lock:{sku-1}:fair:lease  Fair waiters' leases: zset token → expiry (ms, Redis' clock)
//	lock:{sku-1}:fair:fence  hash {n: last fence, t: last ticket, rel: last released token}, no TTL
//	lock:{sku-1}:fair:wake   pub/sub channel: the token of the waiter whose turn it is
//
// The queue and lease sets expire by themselves (PX of the longest
// lease) once no live waiter refreshes them.
//
// # Measured
//
// BenchmarkLock (go test -run '^$' -bench BenchmarkLock -benchtime=1s
// -count=2 ./internal/lock/redislock/) on the 2-core development box (Debian 12),
// redis 7.0.15 as a local process on loopback, go-redis v9.23.0 with two
// clients (two "replicas"), default Options, each case once notified and
// once polling (Options.PollOnly) in the same run; 2026-11-23, with three
// other engineers' builds and tests on the same two cores (load average
// 2.5–6), so the figures are noisy: ranges over the two runs.
//
//	                         acq/s      cmds/acq  p50 wait      p99 wait    max wait
//	Mutex  1 g, no work
//	  notified               5.6k–6.0k  2.00      74–82 µs      0.21 ms     3–4 ms
//	  polling                6.2k       2.00      73–74 µs      0.20 ms     3–5 ms
//	Mutex  8 g, no work
//	  notified               4.0k       4.7       0.51 ms       14–15 ms    33–48 ms
//	  polling                6.0k–6.1k  2.4       84–86 µs      24 ms       0.14–0.22 s
//	Mutex  64 g, 1 ms work
//	  notified               567–582    4.8       53–54 ms      0.80–1.1 s  1.2 s
//	  polling                497–513    11.1–11.5 31–35 ms      0.70–0.75 s 0.95–1.0 s
//	Mutex  512 g, 1 ms work
//	  notified               641–653    4.75      0.39–0.45 s   1.05–1.14 s 1.05–1.16 s
//	  polling                202–230    49–57     1.65–1.76 s   2.2–2.4 s   2.3–2.5 s
//	Reentrant  64 g, 1 ms work
//	  notified               640–649    4.7–4.9   46 ms         1.0–1.1 s   1.1 s
//	  polling                402–463    11.7–12.3 40 ms         0.79–1.1 s  1.1–1.4 s
//	Reentrant 512 g, 1 ms work
//	  notified               472–553    4.9       0.58–0.64 s   1.1 s       1.1 s
//	  polling                237–411    40–42     0.75–1.3 s    1.3–1.7 s   1.35–1.7 s
//
// (The other cases, in bench_test.go, tell the same story.) Uncontended
// nothing changes: one round trip to acquire, one to release. With a
// crowd larger than the clients' connection pools (512 goroutines, pools
// of 20), polling collapses: about 50 commands per acquisition queue for
// the pools, and notified waiting gives 2.8–3.2× the Mutex's acquisitions per
// second (1.1–2.3× the Reentrant's), about 4× lower median wait and 2×
// lower p99, with a tenth of the commands. At 64 goroutines with 1 ms of work it
// gives 1.1–1.6× the throughput with less than half the commands; the
// median is higher because polling lets a releasing holder re-lock at
// once more often (its low p50 is that barging). With an empty critical
// section and few goroutines polling is cheaper: the releaser re-locks
// before anyone could wake, and each notice costs one or two failed tries
// (one woken waiter per client). No acquisition failed.
//
// End to end, at the seeds' load (go run ./loadtest --stock 1000 --buyers
// 1500 --concurrency 1500 --strategies redis,reentrant --work-delay 2ms
// --lock-wait 20s: two replicas behind nginx on the same two cores), the
// sleep-polling waiters sold 407–411 (redis) and 149–158 (reentrant) of the
// 1000 units, turning 1089–1351 buyers away with 503; with notices both
// sold all 1000 with no 503, at 76–140 (redis) and 111–150 (reentrant)
// sales per second (see the README for the table).
//
// # Every lock of the project, side by side
//
// The stock strategies use six lock backends besides this package's SetNX.
// Each has its own package under internal/lock, imports only its own
// client, and mints its own fencing tokens, which Postgres compares in a
// column of their own (a token from one counter says nothing about
// another's). What each does when something fails, and what an acquisition
// costs on the 2-core development box (loopback servers, uncontended
// Lock, p50; measured by each package's benchmark on 2026-11-23 while
// other builds shared the machine, so read ratios, not absolutes):
//
//	lock           package   fence                            acquire p50
//	Mutex (redis)  redislock INCR beside the key, Postgres    42–56 µs
//	                         floor when Redis lost it
//	Reentrant      redislock the same counter as Mutex        one script, like Mutex
//	Fair           redislock its own counter, Postgres floor  46–47 µs
//	Redlock (3)    redlock   a counter on each server, the    211–223 µs
//	                         majority's max, Postgres floor   (Lock+Release 341–369 µs)
//	etcd           etcdlock  the key's create revision        1.07–1.10 ms, fsync on
//	                                                          (Lock+Release 2.06–2.09 ms)
//	ZooKeeper      zklock    the lock node's czxid            0.59–0.71 ms, forceSync=no
//	                                                          (Lock+Release 0.89–1.05 ms)
//	lock table     pglock    the row's grant counter          70–160 µs
//	SetNX          redislock none (the unsafe one)            one SETNX + PEXPIRE
//
// On each fault (the design's vocabulary; "refused" means the stale
// holder's claim on the stock row is refused by the fence, a breach, never
// an oversell):
//
//   - Redis restarted empty: Mutex, Reentrant, Fair and SetNX lose every
//     key, so a second holder can take a lock the first still believes in:
//     refused for the safe ones (Reentrant's and Fair's watchdogs also tell
//     the holder within TTL/3); SetNX oversells. Redlock, etcd, ZooKeeper
//     and pglock do not use that Redis.
//   - One of Redlock's servers restarted empty while a lock is held: a
//     second holder can win a majority with it: two holders, refused.
//   - Holder paused (SIGSTOP, GC) past the TTL: every lease ends (the Redis
//     key's PX, etcd's session lease, ZooKeeper's session, the lock row's
//     expiry on Postgres' clock); the next holder takes over and the stale
//     one is refused when it wakes.
//   - The lock's server down or cut off: waiters time out (503, nothing
//     sold); a holder loses its lease at its validity (Redis locks,
//     Redlock, pglock), when its session ends (etcd), or at once on a lost
//     connection (ZooKeeper), and its sale is rolled back (503 lock-lost).
//   - etcd or ZooKeeper restarted without their data: revisions and zxids
//     start low again, below the fences Postgres has seen, so every sale
//     with that strategy is refused until they catch up: unavailable, never
//     unsafe (keep their data, as compose does).
//
// Waiting: the Redis locks are woken by pub/sub notices (Fair's addressed
// to the head of its queue), etcd and ZooKeeper by a watch on the
// predecessor's key or node; pglock and Redlock poll. The polling ones and
// etcd/ZooKeeper queue a process's waiters of one key in memory (package
// turn), so one waiter per process contends. At the seeds' load (1000
// units, 1500 buyers at once through nginx, 2 ms of work, lock wait 20 s;
// one run, 2026-11-23, nothing else on the machine) every one of them sold
// all 1000 with no 503:
//
//	redis 173 sales/s, reentrant 170, fair 174, redlock 173, etcd 89,
//	zookeeper 129, pglock 171
//
// (sales over the whole run, which includes answering the 500 buyers
// after the sell-out; the README has the table and the command).
package redislock
