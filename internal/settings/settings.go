// Package settings keeps the fleet's default strategy in Postgres, its one
// source of truth, and lets each replica sell with a leased copy of it.
//
// Every switch bumps the setting's version. A replica uses the copy it read
// only while its lease lasts (Options.Lease, from before the read), renews
// it in the background and at once when Postgres announces a switch
// (LISTEN/NOTIFY), and records in setting_leases which version it holds
// until when. A sale that began with the default (Use) pins its version
// until it has been answered, and a replica's lease stays on the oldest
// version a sale of it still uses. A switch returns only once no replica
// holds a running lease on an older version: at once when they all follow
// and their sales of the old default have ended, at the latest when the
// last old lease runs out (a replica that stops renewing). So once Set has
// returned, every replica answers and sells with the new default, no sale
// of the old one is still running, and no copy anywhere (a replica's
// cache, a restored Redis) can bring an older one back.
package settings

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StrategySetting is the name of the default strategy's row in the Postgres
// table settings.
const StrategySetting = "default_strategy"

// ApplicationName is the Postgres application_name of the connections a
// replica should give a Strategy (a pool of their own), so that they can be
// told apart from sales in pg_stat_activity.
const ApplicationName = "inventory-settings"

// Channel is the Postgres NOTIFY channel on which a switch announces the
// setting's new version when it commits.
const Channel = "inventory_settings"

// DefaultLease is how long a replica may sell with the default it read,
// unless Options.Lease says otherwise.
const DefaultLease = 2 * time.Second

// ioTimeout bounds one read or write of the setting, which runs detached
// from the caller's cancellation: a buyer hanging up must neither count as
// Postgres failing nor leave a switch half-announced.
const ioTimeout = 5 * time.Second

// followPoll is how often a switch looks whether every replica follows.
const followPoll = 5 * time.Millisecond

// maxFollowWait bounds how long a switch waits for the sales of the old
// default still running on replicas that renew their leases: a sale ends
// within its own budgets (lock wait, lock and idle timeouts), far sooner.
const maxFollowWait = time.Minute

// Options tune a Strategy; the zero value works.
type Options struct {
	// Lease is how long a replica may use the default it read from
	// Postgres. Run renews it every Lease/4; a switch waits at most Lease
	// for a replica that does not follow (paused, cut off, killed).
	// Default DefaultLease.
	Lease time.Duration
	// Instance names this replica in setting_leases, for people reading
	// it. Default: the host name.
	Instance string
	// Logger gets one line when the lease can no longer be renewed and one
	// when it can again; never one per read. Default: discard.
	Logger *slog.Logger
}

// Strategy is the fleet-wide default sale strategy as this replica sees
// it: Postgres's value (table settings, row StrategySetting) and the lease
// under which this replica may use it.
type Strategy struct {
	db       *pgxpool.Pool
	validate func(string) error
	lease    time.Duration
	holder   string // this process's row in setting_leases
	instance string
	log      *slog.Logger

	mu      sync.Mutex
	name    string
	version int64
	until   time.Time // the lease's end, by this process's monotonic clock
	renewal *renewal  // the renewal under way, if any
	err     error     // the last renewal's error
	failing bool      // the last renewal failed (logged once per change)
	// inUse counts the sales in flight by the version of the default they
	// began with (Use); the lease is recorded on the oldest.
	inUse map[int64]int
	// interrupt ends the listener's wait for a notification, so that it
	// renews at once (nil while it does not wait).
	interrupt context.CancelFunc
}

// renewal is one read of the setting that callers may share.
type renewal struct {
	started time.Time
	done    chan struct{}
}

// NewStrategy returns the fleet default stored in db, which must hold the
// schema of package migrations. validate rejects unknown names.
func NewStrategy(db *pgxpool.Pool, validate func(string) error, opts Options) *Strategy {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Instance == "" {
		opts.Instance, _ = os.Hostname()
	}
	return &Strategy{db: db, validate: validate, lease: opts.Lease, holder: opts.Instance + "-" + randomID(),
		instance: opts.Instance, log: opts.Logger, inUse: map[int64]int{}}
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// Init stores initial as the fleet default unless Postgres has one already,
// so a replica that starts later does not overwrite a switch made since,
// and takes this replica's first lease. A stored name this binary does not
// know is replaced by initial.
func (s *Strategy) Init(ctx context.Context, initial string) error {
	if err := s.validate(initial); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO settings (name, value) VALUES ($1, $2)
			ON CONFLICT (name) DO NOTHING`, StrategySetting, initial); err != nil {
			return err
		}
		var stored string
		if err := tx.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1 FOR UPDATE`, StrategySetting).Scan(&stored); err != nil {
			return err
		}
		if s.validate(stored) != nil {
			if _, err := switchTo(ctx, tx, initial); err != nil {
				return err
			}
		}
		// Replicas that died without a word leave their rows behind.
		_, err := tx.Exec(ctx, `DELETE FROM setting_leases WHERE expires_at < clock_timestamp() - interval '1 hour'`)
		return err
	})
	if err != nil {
		return fmt.Errorf("initialise default strategy: %w", err)
	}
	if err := s.refresh(ctx, time.Now()); err != nil {
		return fmt.Errorf("initialise default strategy: %w", err)
	}
	return nil
}

// Set makes name the fleet default and returns once every replica follows
// it: every lease still running is on the new version (at the latest
// Options.Lease after the commit, when every older lease has run out).
// When it returns an error the switch did not happen, or its outcome is
// unknown (a lost COMMIT reply), or ctx ended while it waited for the
// replicas to follow (the error says which); no copy of an uncommitted
// value exists anywhere.
func (s *Strategy) Set(ctx context.Context, name string) error {
	if err := s.validate(name); err != nil {
		return err
	}
	// Detached: a caller hanging up must not leave the switch undecided.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ioTimeout)
	defer cancel()
	var version int64
	err := pgx.BeginFunc(wctx, s.db, func(tx pgx.Tx) error {
		var err error
		version, err = switchTo(wctx, tx, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("switch default strategy: %w", err)
	}
	committed := time.Now()
	// This replica follows at once, whatever the notification's delay.
	_ = s.refresh(wctx, committed)
	if err := s.awaitFollowers(ctx, version, committed.Add(s.lease)); err != nil {
		return fmt.Errorf("switched the default strategy to %s (version %d), but %w", name, version, err)
	}
	return nil
}

// switchTo writes name as the default in tx, bumps its version and
// announces it on Channel when tx commits.
func switchTo(ctx context.Context, tx pgx.Tx, name string) (version int64, err error) {
	err = tx.QueryRow(ctx, `
		INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, version = settings.version + 1, updated_at = now()
		RETURNING version`, StrategySetting, name).Scan(&version)
	if err != nil {
		return 0, err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, strconv.FormatInt(version, 10))
	return version, err
}

// awaitFollowers returns once no lease on a version below version is
// running. A replica that follows records its lease on version once its
// sales of older defaults have ended; one that stops renewing has its
// lease run out. Postgres failing meanwhile only means waiting until
// deadline (committed + the lease), after which no lease taken before the
// switch can be running, and no replica can renew one, nor commit a sale;
// a replica still renewing a lease on an older version after maxFollowWait
// is an error (the switch has happened). ctx ending gives up the wait.
func (s *Strategy) awaitFollowers(ctx context.Context, version int64, deadline time.Time) error {
	var behind []string
	giveUp := time.Now().Add(maxFollowWait)
	for {
		rows, err := s.db.Query(ctx, `
			SELECT instance FROM setting_leases
			WHERE version < $1 AND expires_at > clock_timestamp()`, version)
		if err == nil {
			behind, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		switch {
		case err == nil && len(behind) == 0:
			return nil
		case err != nil && !time.Now().Before(deadline):
			s.log.WarnContext(ctx, "default strategy switched: Postgres could not be read while replicas followed; every older lease has run out",
				"version", version, "err", err)
			return nil
		case err == nil && !time.Now().Before(giveUp):
			return fmt.Errorf("%v still sell with an older default after %s", behind, maxFollowWait)
		}
		t := time.NewTimer(followPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("gave up waiting for %v to follow: %w", behind, ctx.Err())
		case <-t.C:
		}
	}
}

// Get returns the fleet default this replica may sell with now: its copy
// while the lease on it runs, else a fresh read of Postgres. When Postgres
// cannot be read and the lease has run out it returns "" and the error:
// the replica no longer knows the default, and must not guess.
func (s *Strategy) Get(ctx context.Context) (string, error) {
	s.mu.Lock()
	name, valid := s.name, time.Now().Before(s.until)
	s.mu.Unlock()
	if valid {
		return name, nil
	}
	err := s.refresh(ctx, time.Time{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.until) {
		return s.name, nil
	}
	if err == nil {
		err = errors.New("the lease ran out while it was renewed")
	}
	return "", fmt.Errorf("read default strategy: %w", err)
}

// Use is Get for a sale: it returns the default to sell with and pins its
// version until done is called, once the sale has been answered. While a
// sale pins an older version than the newest this replica read, its lease
// stays on that version, and a switch waits for it (Set); the last such
// sale to end renews the lease at once, so the switch need not wait for
// the next renewal.
func (s *Strategy) Use(ctx context.Context) (name string, done func(), err error) {
	s.mu.Lock()
	valid := time.Now().Before(s.until)
	s.mu.Unlock()
	if !valid {
		// Renewed outside the lock; the copy is pinned below, under it.
		err = s.refresh(ctx, time.Time{})
	}
	s.mu.Lock()
	if !time.Now().Before(s.until) {
		s.mu.Unlock()
		if err == nil {
			err = errors.New("the lease ran out while it was renewed")
		}
		return "", nil, fmt.Errorf("read default strategy: %w", err)
	}
	name, version := s.name, s.version
	s.inUse[version]++
	s.mu.Unlock()
	var once sync.Once
	return name, func() { once.Do(func() { s.release1(version) }) }, nil
}

// release1 ends one sale of version; after the last sale of a version
// older than the newest read, the lease is renewed off the old version at
// once: by the listener (Run), which it wakes, else here.
func (s *Strategy) release1(version int64) {
	s.mu.Lock()
	if s.inUse[version]--; s.inUse[version] <= 0 {
		delete(s.inUse, version)
	}
	behind := version < s.version && s.oldestInUse(s.version) == s.version
	interrupt := s.interrupt
	s.mu.Unlock()
	switch {
	case !behind:
	case interrupt != nil:
		interrupt()
	default:
		s.renew(context.Background())
	}
}

// oldestInUse is the oldest version a sale in flight uses, or newest when
// none uses an older one; s.mu is held.
func (s *Strategy) oldestInUse(newest int64) int64 {
	oldest := newest
	for v := range s.inUse {
		oldest = min(oldest, v)
	}
	return oldest
}

// Run keeps this replica's lease renewed and follows switches as Postgres
// announces them, until ctx ends; then it gives the lease up, so that a
// switch made after this replica stopped does not wait for it.
func (s *Strategy) Run(ctx context.Context) {
	defer s.release()
	every := s.lease / 4
	for ctx.Err() == nil {
		s.listen(ctx, every)
		// Without a listening connection: renew on the clock until the
		// next dial.
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// listen renews the lease on every notification on Channel and at least
// every interval, until ctx ends or the connection fails.
func (s *Strategy) listen(ctx context.Context, every time.Duration) {
	s.renew(ctx)
	conn, err := pgx.ConnectConfig(ctx, s.db.Config().ConnConfig.Copy())
	if err != nil {
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return
	}
	for {
		// Anything switched before LISTEN took effect is read here.
		s.renew(ctx)
		wctx, cancel := context.WithTimeout(ctx, every)
		s.mu.Lock()
		s.interrupt = cancel
		s.mu.Unlock()
		// A timeout, or the interrupt, leaves the connection usable.
		_, err := conn.WaitForNotification(wctx)
		s.mu.Lock()
		s.interrupt = nil
		s.mu.Unlock()
		cancel()
		if ctx.Err() != nil || err != nil && conn.IsClosed() {
			return
		}
	}
}

// renew refreshes the lease from a read that starts now, and logs a change
// between failing and working.
func (s *Strategy) renew(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	err := s.refresh(ctx, time.Now())
	s.mu.Lock()
	changed := (err != nil) != s.failing
	s.failing = err != nil
	name, version, until := s.name, s.version, s.until
	s.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		s.log.WarnContext(ctx, "default strategy: cannot renew the lease from Postgres; sales get 503 once it runs out",
			"strategy", name, "version", version, "lease_left", max(0, time.Until(until)).Round(time.Millisecond), "err", err)
	default:
		s.log.InfoContext(ctx, "default strategy: lease renewed again", "strategy", name, "version", version)
	}
}

// refresh reads the setting and renews the lease, sharing a renewal under
// way that started at notBefore or later (one that started earlier may
// have read a value since replaced, so it is waited out, then another
// started).
func (s *Strategy) refresh(ctx context.Context, notBefore time.Time) error {
	s.mu.Lock()
	for s.renewal != nil {
		r := s.renewal
		s.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		if !r.started.Before(notBefore) {
			err := s.err
			s.mu.Unlock()
			return err
		}
	}
	r := &renewal{started: time.Now(), done: make(chan struct{})}
	s.renewal = r
	s.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ioTimeout)
	err := s.read(rctx)
	cancel()

	s.mu.Lock()
	if err == nil {
		s.until = r.started.Add(s.lease)
	}
	s.renewal, s.err = nil, err
	s.mu.Unlock()
	close(r.done)
	return err
}

// read reads the setting, uses it from then on, and records this
// replica's lease on its version, or on the oldest version a sale of this
// replica still uses (Use). FOR SHARE orders the read against a
// switch: it either records its lease before the switch's UPDATE can lock
// the row (so the switch sees the lease), or waits for the switch to
// commit and reads its value. The value is used before the lease is
// recorded, so a switch that sees the lease never finds this replica
// still on the old value; it is committed, so using it early is safe,
// and the lease is extended only once recorded.
func (s *Strategy) read(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var name string
		var version int64
		err := tx.QueryRow(ctx, `SELECT value, version FROM settings WHERE name = $1 FOR SHARE`, StrategySetting).Scan(&name, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("no default strategy stored (Init was never called)")
		}
		if err != nil {
			return err
		}
		if err := s.validate(name); err != nil {
			return fmt.Errorf("holds %q: %w", name, err)
		}
		s.mu.Lock()
		s.name, s.version = name, version
		held := s.oldestInUse(version)
		s.mu.Unlock()
		_, err = tx.Exec(ctx, `
			INSERT INTO setting_leases (holder, instance, version, expires_at)
			VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 microsecond')
			ON CONFLICT (holder) DO UPDATE SET version = EXCLUDED.version, expires_at = EXCLUDED.expires_at`,
			s.holder, s.instance, held, s.lease.Microseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// release gives this replica's lease up.
func (s *Strategy) release() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.mu.Lock()
	s.until = time.Time{}
	s.mu.Unlock()
	_, _ = s.db.Exec(ctx, `DELETE FROM setting_leases WHERE holder = $1`, s.holder)
}
