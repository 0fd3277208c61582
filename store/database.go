package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlstateNoSuchDatabase is the server's answer to a connection that
// names a database it does not have (invalid_catalog_name, PostgreSQL
// Appendix A).
const sqlstateNoSuchDatabase = "3D000"

// adminDatabase is the database every PostgreSQL server has, through which
// a missing database is created. Nothing of dqnflow's is ever written there.
const adminDatabase = "postgres"

// isNoSuchDatabase reports whether err is the server's answer that the
// database named in the connection does not exist.
func isNoSuchDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateNoSuchDatabase
}

// CreateDatabase creates the database that url names, through the server's
// admin database, unless it exists. It reports whether it created it. Two
// processes racing to create it both succeed.
func CreateDatabase(ctx context.Context, url string) (bool, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return false, fmt.Errorf("create database: parse database URL: %w", err)
	}
	name := cfg.Database
	if name == "" || name == adminDatabase {
		return false, nil
	}
	cfg.Database = adminDatabase
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("create database %q: %w", name, unreachable(cfg, err))
	}
	defer conn.Close(ctx)
	exists, err := databaseExists(ctx, conn, name)
	if err != nil {
		return false, fmt.Errorf("create database %q: %w", name, err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		// Another process created it since the check: the server then
		// answers duplicate_database (42P04) or, when the two creations
		// overlap, a unique violation on pg_database's name (23505: it
		// checks the name before it inserts the row). Either way the
		// database is there now.
		if exists, qerr := databaseExists(ctx, conn, name); qerr == nil && exists {
			return false, nil
		}
		return false, fmt.Errorf("create database %q on %s:%d: %w", name, cfg.Host, cfg.Port, err)
	}
	return true, nil
}

// databaseExists reports whether the server of conn has the database name.
func databaseExists(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var exists bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
	return exists, err
}
