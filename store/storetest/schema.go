// Package storetest gives tests that need PostgreSQL a schema of their own,
// so they run in parallel and again without touching each other's tables.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the database tests use when DATABASE_URL is unset (the
// local server's `test` database, as in `make test`).
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns DATABASE_URL, or DefaultURL when it is unset.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema creates an empty schema named <prefix>_<random> in the database
// URL names, drops it when the test ends, and returns a URL whose
// search_path selects it.
//
// A server that cannot be reached fails the test: the tests that need it
// are the only check of the SQL and of the runs it records, so they never
// skip.
func Schema(t testing.TB, prefix string) string {
	t.Helper()
	base := URL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL is unreachable: %v\n"+
			"These tests need a running server. Start one (`docker compose up -d postgresql`, "+
			"or `pg_ctlcluster 15 main start` on Debian) or point DATABASE_URL at one; the default is %s",
			err, DefaultURL)
	}
	defer conn.Close(ctx)

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := prefix + "_" + hex.EncodeToString(b[:])
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
	return WithSearchPath(t, base, schema)
}

// WithSearchPath adds the search_path runtime parameter to a postgres:// URL.
func WithSearchPath(t testing.TB, base, schema string) string {
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
