package store

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/migrations"
)

// TestSQLiteSchemaCoversEveryMigration: every migration is either part
// of the SQLite schema or named PostgreSQL-only, and schema version 1 is
// the four migrations every SQLite file of that version was created from:
// a migration joining the SQLite schema needs a new version and an upgrade
// of the files of the old one.
func TestSQLiteSchemaCoversEveryMigration(t *testing.T) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		in, pgOnly := slices.Contains(sqliteMigrations, n), slices.Contains(sqlitePostgresOnly, n)
		if in == pgOnly {
			t.Errorf("migration %s: in sqliteMigrations %v, in sqlitePostgresOnly %v; want exactly one", n, in, pgOnly)
		}
	}
	for _, n := range slices.Concat(sqliteMigrations, sqlitePostgresOnly) {
		if !slices.Contains(names, n) {
			t.Errorf("%s is listed but not in migrations/", n)
		}
	}
	v1 := []string{"00001_runs_and_epochs.sql", "00002_checkpoints_and_backtests.sql", "00003_promotions.sql", "00004_run_executions.sql"}
	if sqliteSchemaVersion == 1 && !slices.Equal(sqliteMigrations, v1) {
		t.Errorf("sqliteMigrations = %v at schema version 1, whose files hold %v: raise sqliteSchemaVersion and upgrade the files of version 1", sqliteMigrations, v1)
	}
}

// TestSQLiteColumnTranslation checks the PostgreSQL column definitions the
// migrations use against their SQLite forms, worked by hand.
func TestSQLiteColumnTranslation(t *testing.T) {
	cases := []struct{ pg, want string }{
		{"id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "id INTEGER PRIMARY KEY AUTOINCREMENT"},
		{"config jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object')", "config TEXT NOT NULL CHECK (json_valid(config) AND json_type(config) = 'object')"},
		{"created_at timestamptz NOT NULL DEFAULT now()", "created_at INTEGER NOT NULL"},
		{"pruned_at timestamptz", "pruned_at INTEGER"},
		{"is_best boolean NOT NULL DEFAULT false", "is_best INTEGER NOT NULL DEFAULT 0 CHECK (is_best IN (0, 1))"},
		{"promoted boolean NOT NULL", "promoted INTEGER NOT NULL CHECK (promoted IN (0, 1))"},
		{"sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$')", "sha256 TEXT NOT NULL CHECK (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*')"},
		{"loss double precision NOT NULL", "loss REAL NOT NULL"},
		{"env_steps bigint NOT NULL CHECK (env_steps >= 0)", "env_steps INTEGER NOT NULL CHECK (env_steps >= 0)"},
	}
	for _, c := range cases {
		got, err := sqliteColumn(c.pg)
		if err != nil || got != c.want {
			t.Errorf("sqliteColumn(%q) = %q, %v; want %q", c.pg, got, err, c.want)
		}
	}
	for _, bad := range []string{"tags text[] NOT NULL", "at timestamptz NOT NULL DEFAULT clock_timestamp()", "name text CHECK (name ~ '^a+$')"} {
		if got, err := sqliteColumn(bad); err == nil {
			t.Errorf("sqliteColumn(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := sqliteDDL("CREATE TABLE a (x text)", "ALTER TABLE a RENAME COLUMN x TO y"); err == nil {
		t.Error("sqliteDDL took a RENAME COLUMN it does not translate")
	}
}

// TestSQLiteTablesMatchTheMigratedPostgresSchema creates the SQLite schema
// and applies the migrations to a fresh PostgreSQL schema, and compares
// what they hold: the same tables (less goose's and the PostgreSQL-only
// ones), each with the same columns, nullability and primary key, and
// the same indexes of their own.
func TestSQLiteTablesMatchTheMigratedPostgresSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := newPostgres(t)
	lite := newSQLite(t)

	pgOnly := map[string]bool{"goose_db_version": true}
	for _, name := range sqlitePostgresOnly {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(b)) {
			if strings.HasPrefix(f, "walkforward_") {
				pgOnly[strings.TrimRight(f, "(;,")] = true
			}
		}
	}
	pgTables := pgStrings(t, ctx, pg, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
	pgTables = slices.DeleteFunc(pgTables, func(n string) bool { return pgOnly[n] })
	liteTables := liteStrings(t, lite, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if !slices.Equal(pgTables, liteTables) {
		t.Fatalf("tables: PostgreSQL %v, SQLite %v", pgTables, liteTables)
	}
	for _, table := range pgTables {
		pgCols := pgStrings(t, ctx, pg, `
			SELECT c.column_name || ' null=' || (c.is_nullable = 'YES')::text || ' pk=' ||
			       EXISTS (SELECT 1 FROM information_schema.key_column_usage k
			               JOIN information_schema.table_constraints tc USING (constraint_schema, constraint_name)
			               WHERE tc.constraint_type = 'PRIMARY KEY' AND k.table_schema = c.table_schema
			                 AND k.table_name = c.table_name AND k.column_name = c.column_name)::text
			FROM information_schema.columns c
			WHERE c.table_schema = current_schema() AND c.table_name = $1 ORDER BY c.column_name`, table)
		liteCols := liteStrings(t, lite, `
			SELECT name || ' null=' || CASE WHEN "notnull" OR pk > 0 THEN 'false' ELSE 'true' END ||
			       ' pk=' || CASE WHEN pk > 0 THEN 'true' ELSE 'false' END
			FROM pragma_table_info(?) ORDER BY name`, table)
		if !slices.Equal(pgCols, liteCols) {
			t.Errorf("table %s columns:\nPostgreSQL %v\nSQLite     %v", table, pgCols, liteCols)
		}
		// Indexes of their own: not those behind a primary key or a
		// unique constraint, which each database names its own way.
		pgIdx := pgStrings(t, ctx, pg, `
			SELECT i.indexname FROM pg_indexes i
			WHERE i.schemaname = current_schema() AND i.tablename = $1
			  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
			ORDER BY i.indexname`, table)
		liteIdx := liteStrings(t, lite, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY name`, table)
		if !slices.Equal(pgIdx, liteIdx) {
			t.Errorf("table %s indexes: PostgreSQL %v, SQLite %v", table, pgIdx, liteIdx)
		}
	}
}

func pgStrings(t *testing.T, ctx context.Context, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, _ := s.pool.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

func liteStrings(t *testing.T, s *SQLite, query string, args ...any) []string {
	t.Helper()
	rows, err := s.db.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", query, err))
	}
	return out
}
