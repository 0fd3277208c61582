package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testDefaultURL is the database the tests use when DATABASE_URL is unset.
const testDefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// newSchema creates an empty schema named dqnflow_test_<random> in the
// database DATABASE_URL names, drops it when the test ends, and returns a
// URL whose search_path selects it. Tests that use their own schema can run
// in parallel and again.
//
// A server that cannot be reached fails the test: these tests are the only
// check of the SQL, so they never skip.
func newSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = testDefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL is unreachable: %v\n"+
			"The store tests need a running server. Start one (`docker compose up -d postgresql`, "+
			"or `pg_ctlcluster 15 main start` on Debian) or point DATABASE_URL at one; the default is %s",
			err, testDefaultURL)
	}
	defer conn.Close(ctx)

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "dqnflow_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base, schema)
}

// withSearchPath adds the search_path runtime parameter to a postgres:// URL.
func withSearchPath(t *testing.T, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("DATABASE_URL must be a postgres:// URL for the tests, got %q", base)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// newStore returns a Store on a fresh, migrated schema.
func newStore(t *testing.T) *Store {
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

// newRun creates a run with a small config.
func newRun(t *testing.T, s *Store, r NewRun) Run {
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
func count(t *testing.T, s *Store, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
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
