// Package metadata holds dqnflow's training metadata as Go values: a run
// and its Status, its epochs' metrics, checkpoint and backtest records,
// retrain promotions and champions, and walk-forward studies; and the
// errors (ErrNotFound, ErrInvalid) that say a row is missing or an input
// is one no retry can fix.
//
// It is the contract between the stores that keep these values (package
// store: PostgreSQL and SQLite) and the activities and workflows that pass
// them, so it imports no driver and does no I/O: package workflows, which
// must stay deterministic, links it without linking pgx, SQLite or a
// cloud SDK. The JSON names and the Status strings are the ones recorded
// workflow histories and the database rows hold; changing one breaks the
// replay of recorded runs.
package metadata
