// Package migrations holds dqnflow's PostgreSQL schema as numbered goose SQL
// migrations (NNNNN_name.sql, each with "-- +goose Up" and "-- +goose Down"
// sections), embedded in the binary. store.Migrate applies them; nothing else
// should.
//
// A migration, once released, is never edited: a change to the schema is a
// new file with the next number.
package migrations

import "embed"

// FS holds every migration file at its root; it is the fs.FS that goose's
// Provider reads.
//
//go:embed *.sql
var FS embed.FS
