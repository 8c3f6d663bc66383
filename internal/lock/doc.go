// Package lock is the contract every distributed lock of the project
// implements: a Locker that takes a lock with a bounded wait, a Lease that
// carries a fencing token and a context that ends the moment the lock is
// lost, one set of errors, and the lease state the backends share.
//
// Guarantees every backend gives (package locktest checks them): at most
// one valid lease per key at a time while the holders' clocks run at about
// the same rate and none is paused past its TTL; fences that grow from
// holder to holder per key and Backend, so that the protected storage can
// refuse a stale holder that slipped past those limits; a Lock that gives
// up with ErrTimeout once its wait budget is spent; a lease whose Context
// is cancelled (cause wrapping ErrLost) when the backend tells it the lock
// is gone, and whose Release then reports the loss.
//
// The backends, each a package beside this one that imports no other:
//
//	package     fence (Fence.Backend)                   a lease is lost when
//	redislock   INCR beside the key ("redislock",        the key is gone or not ours at a watchdog
//	            "redislock/fair"), Postgres floor        renewal (TTL/3), or the validity deadline
//	                                                     passes unrenewed
//	redlock     a counter on each server, the            the validity deadline passes (no renewal)
//	            majority's max, Postgres floor
//	etcdlock    the key's create revision                the session's lease ends or its local deadline
//	                                                     passes unrenewed, or the key is deleted
//	zklock      the lock node's czxid                    the connection drops, the session expires,
//	                                                     or the node is deleted
//	pglock      the row's grant counter                  the deadline passes (the row's expiry on
//	                                                     Postgres' clock, no renewal)
package lock
