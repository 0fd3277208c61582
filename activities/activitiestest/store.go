package activitiestest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/store"
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
