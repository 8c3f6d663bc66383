// Package settings keeps fleet-wide settings durable in Postgres and shared
// through Redis, so that every replica follows a change within a second and
// none is lost when Redis loses its data.
package settings

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// StrategyKey is the Redis key holding the fleet's default strategy: the
// fast shared copy of the settings row named StrategySetting.
const StrategyKey = "inventory:strategy"

// StrategySetting is the name of the default strategy's row in the Postgres
// table settings: the durable copy.
const StrategySetting = "default_strategy"

// DefaultRefresh is how long a replica trusts its cached copy of the default.
const DefaultRefresh = 500 * time.Millisecond

// logEvery rate-limits the log line for each kind of health change, so a
// flapping backend cannot flood the log.
const logEvery = time.Minute

// loadTimeout bounds one refresh of the cached default from the backends.
const loadTimeout = 3 * time.Second

// commitTimeout bounds the COMMIT of a switch, which runs detached from the
// caller's cancellation once Redis has the new value.
const commitTimeout = 5 * time.Second

// Options tune a Strategy; the zero value works.
type Options struct {
	// Refresh bounds how stale a replica's view of the default may be.
	// Default DefaultRefresh.
	Refresh time.Duration
	// Logger gets one line when the default can no longer be read where it
	// should be (Redis, then Postgres) and one when that heals, at most one
	// per kind of change per minute; never one per read. Default: discard.
	Logger *slog.Logger
}

// health is where Get last found the default.
type health int

const (
	healthy      health = iota // in Redis (or restored there from Postgres)
	fromPostgres               // Redis unusable: read from Postgres
	lastKnown                  // neither answered: the last value seen
)

// Strategy is the fleet-wide default sale strategy. Postgres holds the
// durable copy (table settings, row StrategySetting) and Redis the shared
// fast one (StrategyKey); each replica caches it for Options.Refresh.
type Strategy struct {
	rdb      redis.UniversalClient
	db       *pgxpool.Pool
	validate func(string) error
	refresh  time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	cached  string
	fetched time.Time
	stale   error // why cached could not be refreshed, while it is served
	// refreshing is set while one Get reads the backends.
	refreshing bool
	health     health
	loggedAt   [lastKnown + 1]time.Time
}

// NewStrategy returns the fleet default stored in db and rdb; db must hold
// the schema of package migrations. validate rejects unknown names.
func NewStrategy(rdb redis.UniversalClient, db *pgxpool.Pool, validate func(string) error, opts Options) *Strategy {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Strategy{rdb: rdb, db: db, validate: validate, refresh: opts.Refresh, log: opts.Logger}
}

// Init stores initial as the fleet default unless Postgres has one already,
// so a replica that starts later does not overwrite a switch made since, and
// then makes Redis agree with Postgres. When Postgres has none but Redis
// does (a fleet upgraded from keeping it in Redis only), Redis's is kept. A
// stored name this binary does not know is replaced by initial.
func (s *Strategy) Init(ctx context.Context, initial string) error {
	if err := s.validate(initial); err != nil {
		return err
	}
	seed := initial
	if v, err := s.rdb.Get(ctx, StrategyKey).Result(); err == nil && s.validate(v) == nil {
		seed = v // switched while only Redis kept the default (before Postgres did)
	}
	name, err := s.publish(ctx, func(tx pgx.Tx) (string, error) {
		if _, err := tx.Exec(ctx, `
			INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO NOTHING`, StrategySetting, seed); err != nil {
			return "", err
		}
		var stored string
		if err := tx.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1 FOR UPDATE`, StrategySetting).Scan(&stored); err != nil {
			return "", err
		}
		if s.validate(stored) == nil {
			return stored, nil
		}
		_, err := tx.Exec(ctx, `UPDATE settings SET value = $2, updated_at = now() WHERE name = $1`, StrategySetting, initial)
		return initial, err
	})
	if err != nil {
		return fmt.Errorf("initialise default strategy: %w", err)
	}
	s.remember(name)
	return nil
}

// Set makes name the fleet default for every replica: Postgres first, then
// Redis. When it returns an error the switch did not happen, or its outcome
// is unknown (a lost reply); either way Redis is then left without the key
// where it can be, so the next read takes whatever Postgres has.
func (s *Strategy) Set(ctx context.Context, name string) error {
	if err := s.validate(name); err != nil {
		return err
	}
	_, err := s.publish(ctx, func(tx pgx.Tx) (string, error) {
		_, err := tx.Exec(ctx, `
			INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`, StrategySetting, name)
		return name, err
	})
	if err != nil {
		return fmt.Errorf("switch default strategy: %w", err)
	}
	s.remember(name)
	return nil
}

// publish writes the setting in Postgres with write, copies the value write
// returns into Redis, and only then commits. The setting's row stays locked
// throughout, so concurrent switches (from any replica) reach Redis in the
// order Postgres commits them, and a switch that fails leaves no value in
// Redis that Postgres does not have.
func (s *Strategy) publish(ctx context.Context, write func(pgx.Tx) (string, error)) (string, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		defer cancel()
		_ = tx.Rollback(rctx) // a no-op after Commit
	}()
	name, err := write(tx)
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	if err := s.rdb.Set(ctx, StrategyKey, name, 0).Err(); err != nil {
		// The SET may have landed with its reply lost: drop the key while
		// the row is still locked, so the next read restores it from
		// Postgres, which is about to roll back.
		s.forget(ctx)
		return "", fmt.Errorf("redis: %w", err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		s.forget(ctx)
		return "", fmt.Errorf("postgres: commit: %w", err)
	}
	return name, nil
}

// forget deletes the Redis copy, best effort, after a failed switch.
func (s *Strategy) forget(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	_ = s.rdb.Del(dctx, StrategyKey).Err()
}

// remember caches name as freshly read.
func (s *Strategy) remember(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached, s.fetched, s.stale = name, time.Now(), nil
}

// Get returns the fleet default, at most the refresh interval old. It reads
// Redis; when Redis has lost the key (a restart, FLUSHALL) it reads Postgres
// and puts the key back, and when Redis cannot be read it reads Postgres.
// Only when neither answers does it return the last value it saw, with the
// error; with no value seen yet it returns "" and the error.
//
// One caller at a time refreshes; the others meanwhile get the value they
// would have got a moment earlier, rather than all waiting on a backend that
// is slow to fail (go-redis spends about half a second dialling a Redis that
// is down).
func (s *Strategy) Get(ctx context.Context) (string, error) {
	s.mu.Lock()
	cached, stale := s.cached, s.stale
	if cached != "" && (s.refreshing || time.Since(s.fetched) < s.refresh) {
		s.mu.Unlock()
		return cached, stale
	}
	s.refreshing = true
	s.mu.Unlock()

	// Detached: a buyer hanging up must not count as a backend failing.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
	name, err := s.load(lctx)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshing = false
	if err != nil {
		err = fmt.Errorf("read default strategy: %w", err)
		if s.cached != "" {
			// Serve the last value, and ask the backends again only
			// after another refresh interval, not on every request.
			s.fetched, s.stale = time.Now(), err
		}
		return s.cached, err
	}
	s.cached, s.fetched, s.stale = name, time.Now(), nil
	return name, nil
}

// load reads the default from Redis, else from Postgres, and reports
// changes of health.
func (s *Strategy) load(ctx context.Context) (string, error) {
	name, redisErr := s.rdb.Get(ctx, StrategyKey).Result()
	if redisErr == nil {
		if redisErr = s.validate(name); redisErr == nil {
			s.report(ctx, healthy, name, nil)
			return name, nil
		}
		redisErr = fmt.Errorf("redis holds %q: %w", name, redisErr)
	}
	lost := errors.Is(redisErr, redis.Nil)
	name, pgErr := s.durable(ctx, lost)
	if pgErr != nil {
		err := fmt.Errorf("redis: %w; postgres: %w", redisErr, pgErr)
		s.report(ctx, lastKnown, "", err)
		return "", err
	}
	if !lost {
		s.report(ctx, fromPostgres, name, redisErr)
		return name, nil
	}
	// NX: a switch that reached Redis since Postgres was read wins.
	restored, err := s.rdb.SetNX(ctx, StrategyKey, name, 0).Result()
	if err != nil {
		s.report(ctx, fromPostgres, name, fmt.Errorf("restore the redis key: %w", err))
		return name, nil
	}
	if restored {
		s.log.InfoContext(ctx, "default strategy restored in Redis from Postgres", "strategy", name, "key", StrategyKey)
	}
	s.report(ctx, healthy, name, nil)
	return name, nil
}

// durable reads the default from Postgres. When it is about to restore the
// Redis key, it waits for a switch in flight (which holds the row until
// Redis has the new value) so as not to restore the value being replaced.
func (s *Strategy) durable(ctx context.Context, restoring bool) (string, error) {
	query := `SELECT value FROM settings WHERE name = $1`
	if restoring {
		query += ` FOR SHARE`
	}
	var name string
	err := s.db.QueryRow(ctx, query, StrategySetting).Scan(&name)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", errors.New("no default strategy stored (Init was never called)")
	case err != nil:
		return "", err
	}
	if err := s.validate(name); err != nil {
		return "", fmt.Errorf("postgres holds %q: %w", name, err)
	}
	return name, nil
}

// report logs a change of health: once per change, and at most once per
// logEvery for each kind of change.
func (s *Strategy) report(ctx context.Context, h health, name string, err error) {
	s.mu.Lock()
	was := s.health
	s.health = h
	last := s.cached
	due := h != was && time.Since(s.loggedAt[h]) >= logEvery
	if due {
		s.loggedAt[h] = time.Now()
	}
	s.mu.Unlock()
	if !due {
		return
	}
	switch h {
	case healthy:
		s.log.InfoContext(ctx, "default strategy readable from Redis again", "strategy", name)
	case fromPostgres:
		s.log.WarnContext(ctx, "default strategy: Redis unusable, reading Postgres until it recovers", "strategy", name, "err", err)
	case lastKnown:
		s.log.ErrorContext(ctx, "default strategy: neither Redis nor Postgres answers, serving the last known value", "strategy", last, "err", err)
	}
}
