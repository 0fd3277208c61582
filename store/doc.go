// Package store keeps dqnflow's training metadata in PostgreSQL through
// pgx/v5: runs, per-epoch metrics, checkpoint metadata (the blobs live in the
// checkpoint store), backtest reports and retrain promotion decisions; and,
// in PostgreSQL only (WalkForwardStore), walk-forward studies: a study's
// header, windows and per-series results with their daily returns.
//
// The schema lives in package migrations and is applied by Migrate, under a
// PostgreSQL advisory lock, so that workers starting together apply it once;
// an SQLite file gets the same tables, translated from the same migrations
// (sqlite_schema.go).
//
// Every write is safe to repeat, because Temporal retries activities: rows
// have natural unique keys (run id; run id and epoch; run id, epoch and
// split; retrain run id) and writes are upserts. Each method's comment says
// what a retry does. Epochs are numbered from 1.
//
// The rows are package metadata's values (metadata.Run,
// metadata.CheckpointRecord, ...), which the activities and workflows use
// without linking a driver.
//
// Errors wrap metadata.ErrNotFound when a run or row does not exist and
// metadata.ErrInvalid when the input breaks a rule no retry can fix (a
// non-finite loss, a malformed SHA-256, an unknown status); activities turn
// the latter into non-retryable errors.
//
// The database comes from DATABASE_URL (URLFromEnv); the tests create a
// throw-away schema in the database DATABASE_URL names and drop it afterwards.
package store
