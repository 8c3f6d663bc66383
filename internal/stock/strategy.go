package stock

import (
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
)

// Strategy names; the HTTP API, the load tester and external checks use them.
const (
	None       = "none"
	Local      = "local"
	SetNX      = "setnx"
	RedisLock  = "redis"
	Reentrant  = "reentrant"
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
}

// Strategies lists every strategy, unsafe ones first.
var Strategies = []Info{
	{None, "read, check and update with no coordination at all", false},
	{Local, "read-check-update inside an in-process mutex: each replica has its own lock", false},
	{SetNX, "read-check-update inside the naive SETNX + EXPIRE Redis lock, unconditional DEL, unguarded write: breaks once a sale outlives the TTL", false},
	{RedisLock, "read-check-update inside a Redis SET NX PX lock; Postgres fences and guards the write", true},
	{Reentrant, "Redis hash lock with re-entry and a watchdog; Postgres fences and guards the write", true},
	{PgLock, "read-check-update inside a lock row in a Postgres table (lease on Postgres' clock); Postgres fences and guards the write", true},
	{Optimistic, "compare-and-set on a version column, retried with jittered backoff", true},
	{Lua, "a Lua script reserves units in a per-round Redis counter, then a guarded Postgres write records the sale", true},
	{Atomic, "one conditional UPDATE ... WHERE quantity >= n", true},
	{ForUpdate, "SELECT ... FOR UPDATE row lock inside a transaction", true},
	{Batch, "sales of a product queue in each replica and commit together: one guarded transaction per batch, 2xx only after its COMMIT", true},
	{Handoff, "the redis lock with a local queue: one contender per product per replica, the holder sells for the whole queue in one fenced transaction", true},
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

// Deps is what the strategies need. Store, Redis and Instance are required;
// every other field's zero value works.
type Deps struct {
	Store    *Store
	Redis    redis.UniversalClient
	Instance string
	// Lock configures the lock strategies (setnx, redis, reentrant, pglock:
	// TTL, Wait and the backoff; Observer too, but for setnx); Lock.Wait is
	// also the budget within which optimistic keeps retrying. Defaults are
	// lock.Options'.
	Lock lock.Options
	// WorkDelay is simulated business work, slept between the read/check and
	// the write wherever a strategy has that gap; it widens races for demos.
	WorkDelay time.Duration
	// OnConflict, when set, is called each time an optimistic attempt loses
	// its compare-and-set, for metrics.
	OnConflict func()
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
