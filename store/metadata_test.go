package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/metadata"
)

// TestLocateFallsBackToSQLiteWithoutPostgreSQL: DATABASE_URL wins; without
// it the local server when it answers; without either the SQLite file,
// which a reader refuses to invent and "dqnflow dev" creates.
func TestLocateFallsBackToSQLiteWithoutPostgreSQL(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), ".dqnflow", "metadata.db")
	closed := "postgres://postgres@127.0.0.1:1/none?sslmode=disable"

	loc, err := locate(ctx, "postgres://u@db:5432/x", closed, file, false)
	if err != nil || loc.URL != "postgres://u@db:5432/x" || loc.Why != "DATABASE_URL" {
		t.Errorf("with DATABASE_URL: %+v, %v", loc, err)
	}
	loc, err = locate(ctx, "", newSchema(t), file, false)
	if err != nil || loc.SQLitePath() != "" || !strings.Contains(loc.Why, "local server") {
		t.Errorf("with a local server: %+v, %v; want it", loc, err)
	}
	_, err = locate(ctx, "", closed, file, false)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "dqnflow dev") {
		t.Errorf("a reader without a store: error %v, want one naming the server tried and dqnflow dev", err)
	}
	loc, err = locate(ctx, "", closed, file, true)
	if err != nil || loc.SQLitePath() != file || !strings.Contains(loc.Why, "127.0.0.1:1") {
		t.Fatalf("dev without a server: %+v, %v; want SQLite %s", loc, err, file)
	}
	st, err := Connect(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := locate(ctx, "", closed, file, false); err != nil {
		t.Errorf("a reader after dev created the file: %v", err)
	}
	if got := loc.String(); got != "SQLite "+file {
		t.Errorf("String() = %q", got)
	}
}

// TestSQLiteRefusesANewerSchema: a file written by a newer dqnflow is an
// error that says to upgrade, not a store that half works.
func TestSQLiteRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "m.db")
	s, err := OpenSQLite(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenSQLite(ctx, file); err == nil || !strings.Contains(err.Error(), "upgrade dqnflow") {
		t.Errorf("open a version-99 file: %v, want an error saying to upgrade", err)
	}
}

// TestSQLiteFileSharedByTwoProcessesTakesEveryWrite: two stores on one
// file (dev's worker and a CLI command, say) write at the same time; each
// write waits for the other's lock instead of failing with "database is
// locked", and every row arrives.
func TestSQLiteFileSharedByTwoProcessesTakesEveryWrite(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "shared.db")
	var stores [2]*SQLite
	for i := range stores {
		s, err := OpenSQLite(ctx, file)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const epochs = 40
	errs := make(chan error, len(stores))
	for i, s := range stores {
		go func() {
			run := fmt.Sprintf("run-%d", i)
			if _, err := s.CreateRun(ctx, metadata.NewRun{RunID: run, Config: json.RawMessage(`{}`)}); err != nil {
				errs <- err
				return
			}
			for e := 1; e <= epochs; e++ {
				if err := s.RecordEpoch(ctx, run, e, metadata.EpochMetrics{Loss: float64(e)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range stores {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range stores {
		eps, err := stores[1-i].ListEpochs(ctx, fmt.Sprintf("run-%d", i))
		if err != nil || len(eps) != epochs {
			t.Errorf("run-%d: %d epochs read through the other store (%v), want %d", i, len(eps), err, epochs)
		}
	}
}
