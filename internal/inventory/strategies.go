package inventory

import (
	"fmt"
	"strings"
)

// Strategy names; the HTTP API, the load tester and external checks use them.
const (
	None       = "none"
	Local      = "local"
	SetNX      = "setnx"
	RedisLock  = "redis"
	Reentrant  = "reentrant"
	Fair       = "fair"
	Redlock    = "redlock"
	Etcd       = "etcd"
	ZooKeeper  = "zookeeper"
	PgLock     = "pglock"
	Optimistic = "optimistic"
	Lua        = "lua"
	Atomic     = "atomic"
	ForUpdate  = "forupdate"
	Batch      = "batch"
	Handoff    = "handoff"
)

// Info describes a strategy for GET /strategies: what it is, told by
// properties that the fault matrix chooses its faults by, never by name.
type Info struct {
	Name        string
	Description string
	// Safe is whether the strategy never oversells with several replicas.
	Safe bool
	// Needs names the setting (an environment variable) of the lock service
	// the strategy needs besides Postgres and Redis; empty when none.
	// stock.New returns ErrNotConfigured when stock.Deps lacks its locker.
	Needs string
	// Lock is the lock a sale takes the product's lock from: a lock
	// backend's name (internal/lock/backend), and after a slash the kind
	// of lock when the backend has several ("redislock/fair"); "" for a
	// sale that takes no lock of a backend (local's mutex is in-process).
	// stock.Deps.Lockers holds the strategy's Locker of that lock.
	Lock string
	// Redis is whether a sale keeps state in the service's own Redis (a
	// lock, a counter, a reservation): a Redis that fails over or jumps
	// its clock strikes it. redlock's servers are its own, not this one.
	Redis bool
	// Batches is whether the strategy commits many sales in one
	// transaction.
	Batches bool
}

// LockBackend is the lock backend of i.Lock ("redislock" for
// "redislock/fair"); "" when the sale takes no lock of a backend.
func (i Info) LockBackend() string {
	b, _, _ := strings.Cut(i.Lock, "/")
	return b
}

// LockKind is the kind of lock of i.Lock ("fair" for "redislock/fair");
// "" for the backend's plain lock.
func (i Info) LockKind() string {
	_, k, _ := strings.Cut(i.Lock, "/")
	return k
}

// Strategies lists every strategy, unsafe ones first.
var Strategies = []Info{
	{Name: None, Description: "read, check and update with no coordination at all", Safe: false},
	{Name: Local, Description: "read-check-update inside an in-process mutex: each replica has its own lock", Safe: false},
	{Name: SetNX, Description: "read-check-update inside the naive SETNX + EXPIRE Redis lock, unconditional DEL, unguarded write: breaks once a sale outlives the TTL", Safe: false,
		Lock: "redislock/setnx", Redis: true},
	{Name: RedisLock, Description: "read-check-update inside a Redis SET NX PX lock; Postgres fences and guards the write", Safe: true,
		Lock: "redislock", Redis: true},
	{Name: Reentrant, Description: "Redis hash lock with re-entry and a watchdog; Postgres fences and guards the write", Safe: true,
		Lock: "redislock/reentrant", Redis: true},
	{Name: Fair, Description: "FIFO Redis lock: buyers queue in arrival order and are woken in turn (no polling); Postgres fences and guards the write", Safe: true,
		Lock: "redislock/fair", Redis: true},
	{Name: Redlock, Description: "read-check-update inside a Redlock held on a majority of N independent Redis servers; Postgres fences and guards the write", Safe: true, Needs: "INVENTORY_REDLOCK_URLS",
		Lock: "redlock"},
	{Name: Etcd, Description: "read-check-update inside an etcd lock (session lease, concurrency.Mutex's recipe); Postgres fences the write with the key's create revision and guards it", Safe: true, Needs: "INVENTORY_ETCD_ENDPOINTS",
		Lock: "etcdlock"},
	{Name: ZooKeeper, Description: "read-check-update inside a ZooKeeper lock (ephemeral sequential node, waiters watch their predecessor, lost with the session); Postgres fences the write with the node's czxid and guards it", Safe: true, Needs: "INVENTORY_ZOOKEEPER_SERVERS",
		Lock: "zklock"},
	{Name: PgLock, Description: "read-check-update inside a lock row in a Postgres table (lease on Postgres' clock); Postgres fences and guards the write", Safe: true,
		Lock: "pglock"},
	{Name: Optimistic, Description: "compare-and-set on a version column, retried with jittered backoff", Safe: true},
	{Name: Lua, Description: "a Lua script reserves units in a per-round Redis counter, then a guarded Postgres write records the sale", Safe: true,
		Redis: true},
	{Name: Atomic, Description: "one conditional UPDATE ... WHERE quantity >= n", Safe: true},
	{Name: ForUpdate, Description: "SELECT ... FOR UPDATE row lock inside a transaction", Safe: true},
	{Name: Batch, Description: "sales queue in each replica and commit together, many products per transaction: one guarded transaction per group, 2xx only after its COMMIT", Safe: true,
		Batches: true},
	{Name: Handoff, Description: "the redis lock with a local queue: one contender per product per replica, the holder sells for the whole queue in one fenced transaction", Safe: true,
		Lock: "redislock", Redis: true, Batches: true},
}

// Names returns every strategy name in the order of Strategies.
func Names() []string {
	names := make([]string, len(Strategies))
	for i, s := range Strategies {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the strategy called name, or ErrUnknownStrategy.
func Lookup(name string) (Info, error) {
	for _, s := range Strategies {
		if s.Name == name {
			return s, nil
		}
	}
	return Info{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownStrategy, name, strings.Join(Names(), ", "))
}
