package store

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store/storetest"
)

// newSchema returns the URL of a fresh schema for this test.
func newSchema(t *testing.T) string { return storetest.Schema(t, "dqnflow_test") }

// newPostgres returns a Store on a fresh, migrated PostgreSQL schema.
func newPostgres(t *testing.T) *Store {
	t.Helper()
	u := newSchema(t)
	ctx := context.Background()
	if err := Migrate(ctx, u); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newSQLite returns an SQLite store in a fresh file.
func newSQLite(t *testing.T) *SQLite {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "metadata.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newRun creates a run with a small config.
func newRun(t *testing.T, s Metadata, r metadata.NewRun) metadata.Run {
	t.Helper()
	if r.Config == nil {
		r.Config = json.RawMessage(`{"seed": 1, "epochs": 20}`)
	}
	run, err := s.CreateRun(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// count returns the number of rows a query's WHERE clause selects.
func count(t *testing.T, s Metadata, table, where string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	q := "SELECT count(*) FROM " + table + " WHERE " + where
	var n int
	var err error
	switch s := s.(type) {
	case *Store:
		err = s.pool.QueryRow(ctx, q, args...).Scan(&n)
	case *SQLite:
		err = s.db.QueryRowContext(ctx, q, args...).Scan(&n)
	default:
		t.Fatalf("count: unknown store %T", s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ptr[T any](v T) *T { return &v }

func wantErrIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want one wrapping %v", err, target)
	}
}

func TestOpenUnreachableServerSaysWhatToDo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Open on a closed port: error = %v, want one naming the address and DATABASE_URL", err)
	}
}

func TestURLFromEnv(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	if got := URLFromEnv(); got != DefaultURL {
		t.Errorf("URLFromEnv() with DATABASE_URL empty = %q, want %q", got, DefaultURL)
	}
	t.Setenv("DATABASE_URL", "postgres://x@db:5432/y")
	if got := URLFromEnv(); got != "postgres://x@db:5432/y" {
		t.Errorf("URLFromEnv() = %q, want DATABASE_URL", got)
	}
}
