package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestDatabasePasswordComesFromTheEnvironmentOrAFile checks the two ways a
// deployment gives the metadata store its password without writing it in
// DATABASE_URL (which shows in process listings and compose files): the
// libpq variables PGPASSWORD and PGPASSFILE (a .pgpass file), which pgx
// reads when the URL has no password, the file taking the host, port,
// database and user into account.
func TestDatabasePasswordComesFromTheEnvironmentOrAFile(t *testing.T) {
	const url = "postgres://dqnflow@db.internal:5432/dqnflow?sslmode=disable"
	t.Setenv("PGPASSWORD", "")
	os.Unsetenv("PGPASSWORD")
	pass := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pass, []byte("other:5432:*:*:wrong\ndb.internal:5432:dqnflow:dqnflow:from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", pass)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.Password; got != "from-file" {
		t.Errorf("password with PGPASSFILE: %q, want the file's entry for the host, database and user", got)
	}
	t.Setenv("PGPASSWORD", "from-env")
	if cfg, err = pgxpool.ParseConfig(url); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.Password; got != "from-env" {
		t.Errorf("password with PGPASSWORD: %q, want from-env", got)
	}
}

// TestDatabasePasswordNeverAppearsInErrors opens the store and applies the
// migrations with URLs that carry a password and fail in each way they can
// (no server, a URL that does not parse, a role the server refuses), and
// checks that no error message, which the CLI prints and workers log,
// contains the password.
func TestDatabasePasswordNeverAppearsInErrors(t *testing.T) {
	const secret = "s3cret-Pw"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, url := range []string{
		"postgres://dqnflow:" + secret + "@127.0.0.1:1/db?sslmode=disable",
		"postgres://dqnflow:" + secret + "@127.0.0.1:1/db?sslmode=disable&x=%zz",
		"postgres://no_such_role_dqnflow:" + secret + "@127.0.0.1:5432/test?sslmode=disable",
		"host=127.0.0.1 port=1 user=dqnflow password=" + secret + " dbname=db sslmode=disable",
	} {
		_, err := Open(ctx, url)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", url)
		}
		merr := Migrate(ctx, url)
		for _, e := range []error{err, merr} {
			if e != nil && strings.Contains(e.Error(), secret) {
				t.Errorf("an error shows the password: %v", e)
			}
		}
	}
}
