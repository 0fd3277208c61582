package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dqnflow/dqnflow/metadata"
)

// DefaultURL is the dqnflow database of the local PostgreSQL server, which
// URLFromEnv falls back to and Locate creates when it is missing: dqnflow
// keeps its rows out of the server's admin database.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/dqnflow?sslmode=disable"

// URLFromEnv returns DATABASE_URL, or DefaultURL when it is unset or empty.
func URLFromEnv() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Store is the metadata store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; a search_path parameter selects the schema) and checks
// that the server answers. It does not apply migrations: call Migrate.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open store: parse database URL: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", unreachable(cfg.ConnConfig, err))
	}
	return &Store{pool: pool}, nil
}

// Close closes every connection; the Store is unusable afterwards.
func (s *Store) Close() { s.pool.Close() }

// unreachable explains a failed connection: where it went and what to do.
func unreachable(cfg *pgx.ConnConfig, err error) error {
	return fmt.Errorf("connect to PostgreSQL at %s:%d database %q: %w "+
		"(start the server, e.g. `docker compose up -d postgresql`, or set DATABASE_URL)",
		cfg.Host, cfg.Port, cfg.Database, err)
}

// tx runs fn in a transaction, committed when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// lockRun locks the run's row until the end of tx, so that writes to one
// run's rows (best flag, epochs_done) are serialised. FOR NO KEY UPDATE
// does not block inserts of child rows by other transactions.
func lockRun(ctx context.Context, tx pgx.Tx, runID string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM runs WHERE run_id = $1 FOR NO KEY UPDATE`, runID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("run %q: %w", runID, metadata.ErrNotFound)
	}
	return err
}

// ensureRun returns an ErrNotFound error when the run does not exist.
func (s *Store) ensureRun(ctx context.Context, runID string) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = $1)`, runID).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("run %q: %w", runID, metadata.ErrNotFound)
	}
	return nil
}

// runRows returns the rows of query, a selection from one run's rows, as
// Ts; when there are none, an ErrNotFound error if the run does not exist,
// so that a List method tells a run without rows from a missing run.
func runRows[T any](ctx context.Context, s *Store, runID, query string, args ...any) ([]T, error) {
	rows, _ := s.pool.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[T])
	if err == nil && len(out) == 0 {
		err = s.ensureRun(ctx, runID)
	}
	return out, err
}

// classify makes the PostgreSQL errors that no retry can fix wrap
// ErrNotFound (a referenced row is missing: foreign_key_violation) or
// ErrInvalid (any other error of a permanent SQLSTATE class); the others
// (a lost connection, a serialization failure, a server shutting down)
// are returned as they are, for the caller to retry.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == "23503": // foreign_key_violation
		return fmt.Errorf("%w: %s: %w", metadata.ErrNotFound, pgErr.Detail, err)
	case permanentClass[pgErr.Code[:min(2, len(pgErr.Code))]]:
		return fmt.Errorf("%w: %w", metadata.ErrInvalid, err)
	}
	return err
}

// permanentClass holds the SQLSTATE classes (the code's first two
// characters, PostgreSQL manual appendix A) of errors that the same
// statement with the same values meets again on every attempt:
//
//	0A feature not supported        21 cardinality violation
//	22 data exception (a NUL in text: 22021, a number out of range: 22003)
//	23 integrity constraint violation (every write is an upsert on its key,
//	   and the one other unique index, the best flag, is written under
//	   the run's row lock, so a 23505 is a bug, not a race)
//	42 syntax error or access rule violation (an undefined table: the
//	   migrations were not applied; a missing privilege)
//	44 WITH CHECK OPTION violation  54 program limit exceeded
//
// The transient classes stay retryable: 08 connection exception, 40
// transaction rollback (serialization failure, deadlock), 53 insufficient
// resources, 57 operator intervention (admin shutdown, query canceled), 58
// system error. ADR 0030.
var permanentClass = map[string]bool{"0A": true, "21": true, "22": true, "23": true, "42": true, "44": true, "54": true}

// score turns an optional score into a column value: nil, NaN and ±Inf (an
// undefined Sharpe ratio) are stored as NULL and never rank.
func score(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	v := *p
	return &v
}

// checkFinite rejects a NaN or infinite value of the named input.
func checkFinite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s is %v, want a finite number", metadata.ErrInvalid, name, v)
	}
	return nil
}

// metricsJSON encodes extra metrics as a JSON object; every value must be
// finite, because JSON has no NaN.
func metricsJSON(m map[string]float64) ([]byte, error) {
	for k, v := range m {
		if err := checkFinite("metric "+k, v); err != nil {
			return nil, err
		}
	}
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(m)
}

// jsonObject checks that raw is one JSON object; empty means {}.
func jsonObject(name string, raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return []byte("{}"), nil
	}
	if !json.Valid(raw) || raw[0] != '{' {
		return nil, fmt.Errorf("%w: %s is not a JSON object", metadata.ErrInvalid, name)
	}
	return raw, nil
}
