// Package backend is how a lock backend describes itself to the service
// that takes its locks, as database/sql/driver describes a database to
// database/sql: each backend package (redislock, pglock, redlock,
// etcdlock, zklock, …) exports one Descriptor, and one explicit list
// names them all (internal/lock/backends). Everything else the service
// does with a lock goes through the lock contract alone: it opens a
// backend by its Descriptor, takes lock.Lockers from it by the names its
// strategies give (Info.Lock), classifies errors by the contract's kinds
// (lock.ErrTimeout, lock.ErrLost, lock.ErrUnavailable), and keeps each
// fencing counter's tokens under the counter's name (lock.Fence), so that
// it never asks which backend it has. The tests and the local fleet start
// the backends' servers by their Descriptors too (Server), without asking
// either.
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"inventory/internal/lock"
)

// Descriptor is one lock backend: what the service needs to know of it to
// configure it, open it and keep its fences.
type Descriptor struct {
	// Name is the backend's name: the Backend of its errors (lock.Error)
	// and the first part of a lock's name, backend[/kind] (stock's
	// Info.Lock), e.g. "etcdlock".
	Name string
	// Setting is the environment variable that points the backend at
	// servers of its own, e.g. INVENTORY_ETCD_ENDPOINTS; "" for a backend
	// on the service's own Postgres or Redis, which is always open. Unset,
	// the backend is not opened, and the strategies that take its locks
	// are unavailable (stock's Info.Needs names the same variable).
	Setting string
	// Secret says that the setting's value may carry passwords (URLs):
	// the service masks them in its log and in Check's errors.
	Secret bool
	// Check, when set, validates the setting's value at start, before
	// anything connects: nil, or what is wrong with it, in one line.
	Check func(value string) error
	// Fences are the fencing counters the backend's leases name
	// (lock.Fence.Backend). Postgres keeps each counter's tokens apart:
	// two backends must never share one.
	Fences []string
	// Open connects the backend with c and returns what makes its
	// lockers. It is called once per process, with the setting set (when
	// the backend has one). An error stops the service at start.
	Open func(ctx context.Context, c Config) (Lockers, error)
	// Server starts throw-away servers for the Setting, for the tests and
	// the local fleet; nil for a backend without a setting, which lives on
	// the service's own Postgres or Redis (they start those anyway).
	Server *Server
}

// Config is what Open gets: the setting's value, the lock options the
// service was configured with, and the service's own connections, which
// a backend may use (pglock keeps its locks in Postgres, redislock in
// Redis) and must not close.
type Config struct {
	// Setting is the value of Descriptor.Setting; "" without one.
	Setting string
	// Options are INVENTORY_LOCK_TTL, INVENTORY_LOCK_WAIT and the
	// service's metrics (lock.Observer).
	Options lock.Options
	// Postgres and Redis are the service's pool and client.
	Postgres *pgxpool.Pool
	Redis    redis.UniversalClient
	// FenceFloor is, for a backend whose fencing counter can be lost (a
	// Redis restarted empty), the highest token of counter (one of
	// Fences) that Postgres has seen for the lock named key: the counter
	// must restart above it. nil: none (tests).
	FenceFloor func(counter string) func(ctx context.Context, key string) (int64, error)
	// Log is for what Open has to say while it waits (for a server still
	// starting, say); nil: slog.Default().
	Log *slog.Logger
}

// Logger is c.Log, or slog.Default() when it is nil.
func (c Config) Logger() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Floor is c.FenceFloor(counter), or nil when c has no FenceFloor.
func (c Config) Floor(counter string) func(ctx context.Context, key string) (int64, error) {
	if c.FenceFloor == nil {
		return nil
	}
	return c.FenceFloor(counter)
}

// Lockers is an open backend: it makes the lockers the strategies take
// their locks from, and closes them.
type Lockers interface {
	// Locker returns a new lock.Locker of the given kind: "" for the
	// backend's plain lock, else one the backend names (redislock's
	// "reentrant", "fair", "setnx"); an error for a kind it has not.
	// Each call makes one of its own, as each strategy has its own.
	Locker(kind string) (lock.Locker, error)
	// Close closes every Locker it made and what Open connected. The
	// service calls it after its drain, so that in-flight sales release
	// their locks first.
	Close()
}

// One is the Lockers of a backend with one kind of lock, the plain one:
// every Locker("") is l, and Close calls closeAll (nil: nothing to close).
func One(name string, l lock.Locker, closeAll func()) Lockers {
	return one{name: name, l: l, close: closeAll}
}

type one struct {
	name  string
	l     lock.Locker
	close func()
}

func (o one) Locker(kind string) (lock.Locker, error) {
	if kind != "" {
		return nil, UnknownKind(o.name, kind)
	}
	return o.l, nil
}

func (o one) Close() {
	if o.close != nil {
		o.close()
	}
}

// UnknownKind is Lockers.Locker's error for a kind of lock backend name has
// not; kinds are the ones it has besides its plain one ("").
func UnknownKind(name, kind string, kinds ...string) error {
	want := []string{`""`}
	for _, k := range kinds {
		want = append(want, strconv.Quote(k))
	}
	return fmt.Errorf("%s has no lock of kind %q (want one of %s)", name, kind, strings.Join(want, ", "))
}
