package activitiestest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/store/storetest"
)

// NewStore returns the tests' metadata store: the real SQLite store in a
// file of its own, closed when the test ends. It is the store "dqnflow
// dev" runs on and passes the store suite, so activity and worker tests
// see the same keys, retries and retention as production, without a
// PostgreSQL server.
func NewStore(t testing.TB) *store.SQLite {
	t.Helper()
	s, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "metadata.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewPostgresStore returns a PostgreSQL store in a new schema named from
// prefix (storetest.Schema), migrated, closed when the test ends.
func NewPostgresStore(t testing.TB, prefix string) *store.Store {
	t.Helper()
	ctx := context.Background()
	u := storetest.Schema(t, prefix)
	if err := store.Migrate(ctx, u); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// HeldCheckpointRow is the tests' store with the row of one epoch's
// checkpoint held back: RecordCheckpoint of Epoch waits until Release is
// closed, then Delay more, so that a test can stop a worker while its
// checkpoint is still being written. Holding, when not nil, is closed
// when the hold begins.
type HeldCheckpointRow struct {
	*store.SQLite
	Epoch   int
	Release <-chan struct{}
	Delay   time.Duration
	Holding chan struct{}

	once sync.Once
}

// RecordCheckpoint records c, after the hold when c is of Epoch.
func (s *HeldCheckpointRow) RecordCheckpoint(ctx context.Context, c metadata.CheckpointRecord) (metadata.CheckpointRecord, error) {
	if c.Epoch == s.Epoch {
		if s.Holding != nil {
			s.once.Do(func() { close(s.Holding) })
		}
		<-s.Release
		time.Sleep(s.Delay)
	}
	return s.SQLite.RecordCheckpoint(ctx, c)
}
