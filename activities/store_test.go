package activities

import "github.com/dqnflow/dqnflow/store"

// Both metadata stores implement what the activities ask of one. The
// check lives in a test because package activities links no store: the
// workflows, which import it, must not link a database driver.
var (
	_ Store            = (*store.Store)(nil)
	_ Store            = (*store.SQLite)(nil)
	_ WalkForwardStore = (*store.Store)(nil)
	_ WalkForwardStore = (*store.SQLite)(nil)
)
