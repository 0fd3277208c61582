package store

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/dqnflow/dqnflow/migrations"
)

// Migrate applies the pending migrations to the store's database. See the
// package-level Migrate.
func (s *Store) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(s.pool) // closing db leaves the pool open
	defer db.Close()
	return migrate(ctx, db)
}

// Migrate applies every pending migration of package migrations to the
// schema that url's search_path selects (by default "public"). It is
// idempotent: with nothing pending it changes nothing.
//
// Two processes may call it at once: each takes a PostgreSQL session-level
// advisory lock first (goose's session locker, whose lock dies with the
// connection if the process does), so one applies the migrations and the
// other waits, up to five minutes, then finds nothing to do. The lock id is
// derived from the schema name, so schemas migrate independently.
func Migrate(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("migrate: parse database URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("migrate: %w", unreachable(cfg, err))
	}
	return migrate(ctx, db)
}

func migrate(ctx context.Context, db *sql.DB) error {
	p, err := newProvider(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// newProvider returns a goose Provider for the embedded migrations that
// locks the current schema while it runs. Closing the Provider closes db.
func newProvider(ctx context.Context, db *sql.DB) (*goose.Provider, error) {
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, err
	}
	if !schema.Valid {
		return nil, fmt.Errorf("no schema of the search_path exists; create it or fix the URL's search_path parameter")
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(schema.String)),
		lock.WithLockTimeout(1, 300), // probe every second, for up to 5 minutes
	)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
}

// lockID is the advisory lock key that guards migrations of one schema:
// FNV-1a (64 bit) of "dqnflow migrations " + schema.
func lockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("dqnflow migrations " + schema))
	return int64(h.Sum64())
}

// MigrateLocation brings loc's schema up to date ("dqnflow migrate"): the
// local server's own database (DefaultURL) is created when missing, an
// SQLite file is created or its schema checked (Connect), a PostgreSQL
// database is migrated (Migrate).
func MigrateLocation(ctx context.Context, loc Location) error {
	if loc.URL == DefaultURL {
		if _, err := CreateDatabase(ctx, loc.URL); err != nil {
			return err
		}
	}
	if loc.SQLitePath() != "" {
		st, err := Connect(ctx, loc)
		if err != nil {
			return err
		}
		st.Close()
		return nil
	}
	return Migrate(ctx, loc.URL)
}
