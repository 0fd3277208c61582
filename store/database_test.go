package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/store/storetest"
)

// TestDefaultStoreIsADatabaseOfItsOwn: the local server's fallback is a
// database named for dqnflow, never the admin database "postgres" that
// `make run` once filled with its rows.
func TestDefaultStoreIsADatabaseOfItsOwn(t *testing.T) {
	cfg, err := pgx.ParseConfig(DefaultURL)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "dqnflow" {
		t.Errorf("DefaultURL names database %q, want dqnflow", cfg.Database)
	}
}

// scratchDatabase returns the URL of a database of the test server that
// does not exist yet, named prefix and a random suffix, and drops it when
// the test ends.
func scratchDatabase(t *testing.T, prefix string) (string, string) {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + hex.EncodeToString(b[:])
	u, err := url.Parse(storetest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	local := u.String()
	t.Cleanup(func() {
		cfg, err := pgx.ParseConfig(local)
		if err != nil {
			return
		}
		cfg.Database = adminDatabase
		if conn, err := pgx.ConnectConfig(context.Background(), cfg); err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			conn.Close(context.Background())
		}
	})
	return local, name
}

// TestCreateDatabaseRacersAllSucceed: processes that start at once (dev and
// a worker) and all find the database missing all succeed, and exactly one
// reports that it created it. Before, the losers of the race failed with
// the server's unique violation on pg_database (23505), which PostgreSQL
// raises instead of duplicate_database when two creations overlap.
func TestCreateDatabaseRacersAllSucceed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	local, name := scratchDatabase(t, "dqnflow_race_")
	var wg sync.WaitGroup
	created := make([]bool, 4)
	errs := make([]error, len(created))
	for i := range created {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[i], errs[i] = CreateDatabase(ctx, local)
		}()
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("racer %d: %v", i, err)
		}
		if created[i] {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d racers say they created %s, want 1", n, name)
	}
}

// TestLocateCreatesItsDatabaseOnTheLocalServer: with DATABASE_URL unset and
// a local server that has no dqnflow database, a writer (dev, a worker)
// creates it and uses it; a reader is told to start one first, or reads
// the SQLite file "dqnflow dev" left in the directory.
func TestLocateCreatesItsDatabaseOnTheLocalServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	local, name := scratchDatabase(t, "dqnflow_locate_")
	file := filepath.Join(t.TempDir(), "metadata.db")

	_, err := locate(ctx, "", local, file, false)
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "dqnflow dev") {
		t.Fatalf("a reader, no database yet: error %v, want one naming %s and dqnflow dev", err, name)
	}
	sq, err := OpenSQLite(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	sq.Close()
	if loc, err := locate(ctx, "", local, file, false); err != nil || loc.SQLitePath() != file {
		t.Errorf("a reader, no database on the server but an SQLite file here: %+v, %v; want the file", loc, err)
	}
	loc, err := locate(ctx, "", local, file, true)
	if err != nil || loc.URL != local || !strings.Contains(loc.Why, "created") {
		t.Fatalf("a writer, no database yet: %+v, %v; want %s created", loc, err, name)
	}
	st, err := Connect(ctx, loc)
	if err != nil {
		t.Fatalf("connect to the created database: %v", err)
	}
	st.Close()
	loc, err = locate(ctx, "", local, file, false)
	if err != nil || loc.URL != local || strings.Contains(loc.Why, "created") {
		t.Errorf("a reader after the writer: %+v, %v; want the database, not created again", loc, err)
	}
	if created, err := CreateDatabase(ctx, local); err != nil || created {
		t.Errorf("CreateDatabase on an existing database = %v, %v; want false, nil", created, err)
	}
}
