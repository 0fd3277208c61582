// Package e2e holds dqnflow's end-to-end tests. They run the real programs
// as processes, the way a user does: the pinned Temporal dev server
// (bin/temporal, or $DQNFLOW_TEMPORAL), `dqnflow worker` and the `dqnflow`
// command line (built from this module, or $DQNFLOW_BIN), against the
// PostgreSQL server of $DATABASE_URL in a schema of their own.
//
// `make test` runs them; `go test -short` skips them. A missing Temporal
// CLI fails them (run `make temporal`), so that CI never passes without
// having run them.
package e2e
