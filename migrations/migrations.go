// Package migrations holds the database schema as goose migrations embedded
// in the binary, and applies them safely from several replicas at once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// FS is the embedded migration files, for tools that want to list or print them.
var FS = files

// lockID is the Postgres advisory lock key taken while migrating; any fixed
// number works as long as every replica uses the same one.
const lockID int64 = 0x696e76656e746f72 // "inventor"

// Up applies every pending migration to db. Replicas that start together may
// all call it: a session-level Postgres advisory lock lets one migrate while
// the others wait (polling once a second, for up to five minutes or until ctx
// ends) and then find nothing left to do.
//
// db is typically stdlib.OpenDBFromPool(pool); Up does not close it.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Version returns the schema version db is at (0 when never migrated).
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := provider(db)
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	// The Provider is not closed: its Close would close the caller's db.
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("migrations: provider: %w", err)
	}
	return p, nil
}
