package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"path/filepath"
	"strings"
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

// TestLocateCreatesItsDatabaseOnTheLocalServer: with DATABASE_URL unset and
// a local server that has no dqnflow database, a writer (dev, a worker)
// creates it and uses it; a reader is told to start one first, or reads
// the SQLite file "dqnflow dev" left in the directory.
func TestLocateCreatesItsDatabaseOnTheLocalServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "dqnflow_locate_" + hex.EncodeToString(b[:])
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
	file := filepath.Join(t.TempDir(), "metadata.db")

	_, err = locate(ctx, "", local, file, false)
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
