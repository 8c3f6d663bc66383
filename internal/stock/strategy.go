package stock

import (
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock/etcdlock"
	"inventory/internal/lock/redislock"
	"inventory/internal/lock/zklock"
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

// Info describes a strategy for GET /strategies.
type Info struct {
	Name        string
	Description string
	// Safe is whether the strategy never oversells with several replicas.
	Safe bool
	// Needs names the setting (an environment variable) of the lock service
	// the strategy needs besides Postgres and Redis; empty when none. New
	// returns ErrNotConfigured when Deps lacks that service.
	Needs string
}

// Strategies lists every strategy, unsafe ones first.
var Strategies = []Info{
	{Name: None, Description: "read, check and update with no coordination at all", Safe: false},
	{Name: Local, Description: "read-check-update inside an in-process mutex: each replica has its own lock", Safe: false},
	{Name: SetNX, Description: "read-check-update inside the naive SETNX + EXPIRE Redis lock, unconditional DEL, unguarded write: breaks once a sale outlives the TTL", Safe: false},
	{Name: RedisLock, Description: "read-check-update inside a Redis SET NX PX lock; Postgres fences and guards the write", Safe: true},
	{Name: Reentrant, Description: "Redis hash lock with re-entry and a watchdog; Postgres fences and guards the write", Safe: true},
	{Name: Fair, Description: "FIFO Redis lock: buyers queue in arrival order and are woken in turn (no polling); Postgres fences and guards the write", Safe: true},
	{Name: Redlock, Description: "read-check-update inside a Redlock held on a majority of N independent Redis servers; Postgres fences and guards the write", Safe: true, Needs: "INVENTORY_REDLOCK_URLS"},
	{Name: Etcd, Description: "read-check-update inside an etcd lock (session lease, concurrency.Mutex's recipe); Postgres fences the write with the key's create revision and guards it", Safe: true, Needs: "INVENTORY_ETCD_ENDPOINTS"},
	{Name: ZooKeeper, Description: "read-check-update inside a ZooKeeper lock (ephemeral sequential node, waiters watch their predecessor, lost with the session); Postgres fences the write with the node's czxid and guards it", Safe: true, Needs: "INVENTORY_ZOOKEEPER_SERVERS"},
	{Name: PgLock, Description: "read-check-update inside a lock row in a Postgres table (lease on Postgres' clock); Postgres fences and guards the write", Safe: true},
	{Name: Optimistic, Description: "compare-and-set on a version column, retried with jittered backoff", Safe: true},
	{Name: Lua, Description: "a Lua script reserves units in a per-round Redis counter, then a guarded Postgres write records the sale", Safe: true},
	{Name: Atomic, Description: "one conditional UPDATE ... WHERE quantity >= n", Safe: true},
	{Name: ForUpdate, Description: "SELECT ... FOR UPDATE row lock inside a transaction", Safe: true},
	{Name: Batch, Description: "sales of a product queue in each replica and commit together: one guarded transaction per batch, 2xx only after its COMMIT", Safe: true},
	{Name: Handoff, Description: "the redis lock with a local queue: one contender per product per replica, the holder sells for the whole queue in one fenced transaction", Safe: true},
}

// Names returns every strategy name in the order of Strategies.
func Names() []string {
	names := make([]string, len(Strategies))
	for i, s := range Strategies {
		names[i] = s.Name
	}
	return names
}

// notConfigured is New's error for a strategy whose lock service Deps lacks.
func notConfigured(info Info) error {
	return fmt.Errorf("%w: strategy %q needs %s, which is not set", ErrNotConfigured, info.Name, info.Needs)
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

// Deps is what the strategies need. Store, Redis and Instance are required;
// every other field's zero value works.
type Deps struct {
	Store    *Store
	Redis    redis.UniversalClient
	Instance string
	// Lock configures the lock strategies (setnx, redis, reentrant, pglock:
	// TTL, Wait and the backoff; Observer too, but for setnx); Lock.Wait is
	// also the budget within which optimistic keeps retrying. Defaults are
	// redislock.Options'.
	Lock redislock.Options
	// Redlock is the redlock strategy's independent Redis servers
	// (INVENTORY_REDLOCK_URLS), three or more, not replicas of one another
	// nor the Redis above; nil: not configured. Their clients should have
	// ContextTimeoutEnabled (see package redlock).
	Redlock []redis.UniversalClient
	// Etcd is the etcd lock the etcd strategy takes (built from
	// INVENTORY_ETCD_ENDPOINTS, with its own TTL and Wait); nil: not
	// configured, and New(Etcd) returns ErrNotConfigured.
	Etcd *etcdlock.Locker
	// WorkDelay is simulated business work, slept between the read/check and
	// the write wherever a strategy has that gap; it widens races for demos.
	WorkDelay time.Duration
	// ZooKeeper is the replica's ZooKeeper lock client (one session) for
	// the zookeeper strategy; nil: not configured. Its own Options (TTL as
	// session timeout, Wait) apply, not Lock's.
	ZooKeeper *zklock.Locker
	// OnConflict, when set, is called each time an optimistic attempt loses
	// its compare-and-set, for metrics.
	OnConflict func()
	// Holds records every critical section held under a lock strategy's
	// lock (local, setnx and the safe lock strategies; one per batch for
	// handoff), so overlapping holders can be measured; nil: not recorded.
	Holds *HoldLog
}

// New builds the strategy called name. Each call makes an independent seller:
// build each strategy once per process (the local strategy's mutexes live in it).
func New(name string, d Deps) (Seller, error) {
	if d.Store == nil || d.Redis == nil || d.Instance == "" {
		return nil, fmt.Errorf("stock.New(%q): Deps needs Store, Redis and Instance", name)
	}
	switch name {
	case None:
		return newNone(d), nil
	case Local:
		return newLocal(d), nil
	case SetNX:
		return newSetNX(d), nil
	case RedisLock:
		return newRedisLock(d), nil
	case Reentrant:
		return newReentrant(d), nil
	case Fair:
		return newFair(d), nil
	case Redlock:
		if d.Redlock == nil {
			info, _ := Lookup(name)
			return nil, notConfigured(info)
		}
		return newRedlock(d), nil
	case Etcd:
		if d.Etcd == nil {
			info, _ := Lookup(Etcd)
			return nil, notConfigured(info)
		}
		return newEtcdLock(d), nil
	case ZooKeeper:
		if d.ZooKeeper == nil {
			info, _ := Lookup(name)
			return nil, notConfigured(info)
		}
		return newZooKeeper(d), nil
	case PgLock:
		return newPgLock(d), nil
	case Optimistic:
		return newOptimistic(d), nil
	case Lua:
		return newLua(d), nil
	case Atomic:
		return newAtomic(d), nil
	case ForUpdate:
		return newForUpdate(d), nil
	case Batch:
		return newBatch(d), nil
	case Handoff:
		return newHandoff(d), nil
	}
	_, err := Lookup(name)
	return nil, err
}
