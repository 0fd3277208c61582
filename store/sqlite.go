package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
)

// SQLite is the metadata store of one machine: an embedded SQLite file
// (modernc.org/sqlite, pure Go, so the binary stays static), the way
// Temporal's dev server keeps its own state. "dqnflow dev" uses it when no
// PostgreSQL is configured or running; every shared deployment uses *Store.
//
// It keeps the same rows under the same keys and rules as *Store, and
// passes the same suite. Walk-forward studies are the exception: they are
// not part of Metadata, and *SQLite refuses them (ErrWalkForwardSQLite,
// ADR 0040). Writers are serialised: the database has one
// connection, and each write transaction begins IMMEDIATE, taking SQLite's
// write lock at once, which stands in for PostgreSQL's row locks and
// advisory locks. Other processes (the CLI beside "dqnflow dev") wait for
// the lock up to the busy timeout.
type SQLite struct {
	db   *sql.DB
	path string
	now  func() time.Time
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// OpenSQLite opens (creating it and its directory if need be) the SQLite
// metadata file at path and creates its schema. ":memory:" opens a
// private in-memory database.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	dsn := ":memory:"
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
		}
		dsn = "file:" + filepath.ToSlash(path)
	}
	dsn += "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_txlock=immediate"
	if path != ":memory:" {
		dsn += "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	// One connection: writes are serialised in this process, and an
	// in-memory database is one database.
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &SQLite{db: db, path: path, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open SQLite store %s: %w", path, err)
	}
	return s, nil
}

// migrate creates the schema in an empty database and refuses a file
// written by a newer dqnflow.
func (s *SQLite) migrate(ctx context.Context) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
			return err
		}
		switch {
		case v == sqliteSchemaVersion:
			return nil
		case v > sqliteSchemaVersion:
			return fmt.Errorf("schema version %d is newer than this dqnflow's %d: upgrade dqnflow", v, sqliteSchemaVersion)
		}
		schema, err := sqliteSchema()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		_, err = tx.ExecContext(ctx, sqliteSetSchemaVersion)
		return err
	})
}

// Path is the database file (":memory:" for an in-memory one).
func (s *SQLite) Path() string { return s.path }

// Close closes the database; the SQLite is unusable afterwards.
func (s *SQLite) Close() { s.db.Close() }

// tx runs fn in an IMMEDIATE transaction, committed when fn returns nil.
func (s *SQLite) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// nanos is a time as stored: Unix nanoseconds.
func nanos(t time.Time) int64 { return t.UnixNano() }

// fromNanos is a stored time, in UTC.
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nullTime turns a nullable stored time into a *time.Time.
func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// sqliteClassify makes the SQLite errors that no retry can fix wrap
// ErrNotFound (a referenced row is missing) or ErrInvalid (any other
// constraint, a value too big or of the wrong type, an SQL error such as a
// missing table), as classify does for PostgreSQL; SQLITE_BUSY, LOCKED,
// IOERR, FULL and the like stay retryable.
func sqliteClassify(err error) error {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return err
	}
	switch primary := e.Code() & 0xff; {
	case e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY,
		primary == sqlite3.SQLITE_CONSTRAINT && strings.Contains(e.Error(), "FOREIGN KEY"):
		return fmt.Errorf("%w: a referenced row does not exist: %w", metadata.ErrNotFound, err)
	case primary == sqlite3.SQLITE_CONSTRAINT, primary == sqlite3.SQLITE_TOOBIG, primary == sqlite3.SQLITE_MISMATCH,
		primary == sqlite3.SQLITE_RANGE, primary == sqlite3.SQLITE_ERROR:
		return fmt.Errorf("%w: %w", metadata.ErrInvalid, err)
	}
	return err
}

// sqliteRunColumns are the columns scanRun reads, in its order.
const sqliteRunColumns = `run_id, workflow_id, COALESCE(execution_id, ''), lineage, COALESCE(parent_run_id, ''), config, status,
	backend, device, precision, epochs_done, best_epoch, best_valid_sharpe,
	COALESCE(error, ''), created_at, updated_at, finished_at`

type scanner interface{ Scan(dest ...any) error }

func scanRun(row scanner) (metadata.Run, error) {
	var r metadata.Run
	var cfg string
	var created, updated int64
	var finished sql.NullInt64
	err := row.Scan(&r.RunID, &r.WorkflowID, &r.ExecutionID, &r.Lineage, &r.ParentRunID, &cfg, &r.Status,
		&r.Backend, &r.Device, &r.Precision, &r.EpochsDone, &r.BestEpoch, &r.BestValidSharpe,
		&r.Error, &created, &updated, &finished)
	if err != nil {
		return metadata.Run{}, err
	}
	r.Config = json.RawMessage(cfg)
	r.CreatedAt, r.UpdatedAt, r.FinishedAt = fromNanos(created), fromNanos(updated), nullTime(finished)
	return r, nil
}

// sqliteEnsureRun returns an ErrNotFound error when the run does not exist.
func sqliteEnsureRun(ctx context.Context, q querier, runID string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE run_id = ?`, runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("run %q: %w", runID, metadata.ErrNotFound)
	}
	return err
}

// CreateRun is Store.CreateRun.
func (s *SQLite) CreateRun(ctx context.Context, r metadata.NewRun) (metadata.Run, error) {
	if r.RunID == "" {
		return metadata.Run{}, fmt.Errorf("create run: %w: empty run id", metadata.ErrInvalid)
	}
	cfg, err := jsonObject("config", r.Config)
	if err != nil || len(r.Config) == 0 {
		return metadata.Run{}, fmt.Errorf("create run %s: %w: config must be the RunConfig JSON object", r.RunID, metadata.ErrInvalid)
	}
	now := nanos(s.now())
	var run metadata.Run
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if r.ExecutionID == "" {
			lineage := r.Lineage
			if lineage == "" {
				lineage = r.RunID
			}
			var err error
			run, err = scanRun(tx.QueryRowContext(ctx, `
				INSERT INTO runs (run_id, workflow_id, lineage, parent_run_id, config, created_at, updated_at)
				VALUES (?1, ?1, ?2, NULLIF(?3, ''), ?4, ?5, ?5)
				ON CONFLICT (run_id) DO UPDATE SET updated_at = excluded.updated_at
				RETURNING `+sqliteRunColumns,
				r.RunID, lineage, r.ParentRunID, string(cfg), now))
			return err
		}
		// As in Store.CreateRun: the workflow id if it is free, else one
		// suffixed with the execution id.
		for _, id := range []string{r.RunID, r.RunID + "." + r.ExecutionID} {
			lineage := r.Lineage
			if lineage == "" {
				lineage = id
			}
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO runs (run_id, workflow_id, execution_id, lineage, parent_run_id, config, created_at, updated_at)
				VALUES (?1, ?2, ?3, ?4, NULLIF(?5, ''), ?6, ?7, ?7)
				ON CONFLICT DO NOTHING`,
				id, r.RunID, r.ExecutionID, lineage, r.ParentRunID, string(cfg), now); err != nil {
				return err
			}
			var err error
			run, err = scanRun(tx.QueryRowContext(ctx, `
				UPDATE runs SET updated_at = ?3 WHERE workflow_id = ?1 AND execution_id = ?2
				RETURNING `+sqliteRunColumns, r.RunID, r.ExecutionID, now))
			if err == nil {
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		return fmt.Errorf("%w: run ids %s and %s.%s are both taken by other executions", metadata.ErrInvalid, r.RunID, r.RunID, r.ExecutionID)
	})
	if err != nil {
		if r.ExecutionID != "" {
			return metadata.Run{}, fmt.Errorf("create run %s (execution %s): %w", r.RunID, r.ExecutionID, sqliteClassify(err))
		}
		return metadata.Run{}, fmt.Errorf("create run %s: %w", r.RunID, sqliteClassify(err))
	}
	return run, nil
}

// SetRunStatus is Store.SetRunStatus.
func (s *SQLite) SetRunStatus(ctx context.Context, runID string, status metadata.Status, errText string) error {
	if !status.Valid() {
		return fmt.Errorf("set run %s status: %w: unknown status %q", runID, metadata.ErrInvalid, status)
	}
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET
			status = ?2,
			error = NULLIF(?3, ''),
			finished_at = CASE WHEN NOT ?4 THEN NULL
			                   WHEN status = ?2 THEN COALESCE(finished_at, ?5)
			                   ELSE ?5 END,
			updated_at = ?5
		WHERE run_id = ?1`,
		runID, string(status), errtext.Clean(errText), status.Terminal(), nanos(s.now()))
	if err != nil {
		return fmt.Errorf("set run %s status %s: %w", runID, status, sqliteClassify(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set run %s status %s: run %w", runID, status, metadata.ErrNotFound)
	}
	return nil
}

// SetRunDevice is Store.SetRunDevice.
func (s *SQLite) SetRunDevice(ctx context.Context, runID, backend, device, precision string) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET backend = ?2, device = ?3, precision = ?4, updated_at = ?5 WHERE run_id = ?1`,
		runID, backend, device, precision, nanos(s.now()))
	if err != nil {
		return fmt.Errorf("set run %s device: %w", runID, sqliteClassify(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set run %s device: run %w", runID, metadata.ErrNotFound)
	}
	return nil
}

// GetRun is Store.GetRun.
func (s *SQLite) GetRun(ctx context.Context, runID string) (metadata.Run, error) {
	run, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+sqliteRunColumns+` FROM runs WHERE run_id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.Run{}, fmt.Errorf("get run %s: %w", runID, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return run, nil
}

// ListRuns is Store.ListRuns.
func (s *SQLite) ListRuns(ctx context.Context, f RunFilter) ([]metadata.Run, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list runs: %w: limit %d is negative", metadata.ErrInvalid, f.Limit)
	}
	limit := f.Limit
	if limit == 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT `+sqliteRunColumns+` FROM runs
		WHERE (?1 = '' OR lineage = ?1) AND (?2 = '' OR status = ?2)
		ORDER BY created_at DESC, run_id
		LIMIT ?3`, f.Lineage, string(f.Status), limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := collect(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// collect scans every row with scan; the result is never nil.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// sqliteRunRows is runRows: the rows of query, scanned with scan, and an
// ErrNotFound error when there are none because the run does not exist.
func sqliteRunRows[T any](ctx context.Context, q querier, runID string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out, err := collect(rows, scan)
	if err == nil && len(out) == 0 {
		err = sqliteEnsureRun(ctx, q, runID)
	}
	return out, err
}

// sqliteRefreshRunBest is refreshRunBest.
func sqliteRefreshRunBest(ctx context.Context, tx *sql.Tx, runID string, now int64) error {
	_, err := tx.ExecContext(ctx, `
		WITH top AS (
			SELECT epoch, s FROM (
				SELECT epoch, valid_sharpe AS s FROM epochs WHERE run_id = ?1 AND valid_sharpe IS NOT NULL
				UNION ALL
				SELECT epoch, sharpe FROM backtests WHERE run_id = ?1 AND split = 'valid' AND sharpe IS NOT NULL
			)
			ORDER BY s DESC, epoch
			LIMIT 1
		)
		UPDATE runs SET
			best_epoch = (SELECT epoch FROM top),
			best_valid_sharpe = (SELECT s FROM top),
			updated_at = ?2
		WHERE run_id = ?1`, runID, now)
	return err
}

// RecordEpoch is Store.RecordEpoch.
func (s *SQLite) RecordEpoch(ctx context.Context, runID string, epoch int, m metadata.EpochMetrics) error {
	metrics, err := validEpochMetrics(epoch, m)
	if err != nil {
		return fmt.Errorf("record epoch %d of run %s: %w", epoch, runID, err)
	}
	now := nanos(s.now())
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if err := sqliteEnsureRun(ctx, tx, runID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO epochs (run_id, epoch, loss, grad_norm, env_steps, global_step, valid_sharpe, duration_ms, metrics, recorded_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6,
				COALESCE(?7, (SELECT sharpe FROM backtests WHERE run_id = ?1 AND epoch = ?2 AND split = 'valid')),
				?8, ?9, ?10)
			ON CONFLICT (run_id, epoch) DO UPDATE SET
				loss = excluded.loss, grad_norm = excluded.grad_norm,
				env_steps = excluded.env_steps, global_step = excluded.global_step,
				valid_sharpe = COALESCE(?7, valid_sharpe),
				duration_ms = excluded.duration_ms, metrics = excluded.metrics,
				recorded_at = excluded.recorded_at`,
			runID, epoch, m.Loss, m.GradNorm, m.EnvSteps, m.GlobalStep, score(m.ValidSharpe), m.DurationMS, string(metrics), now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE runs SET epochs_done = MAX(epochs_done, ?2), updated_at = ?3 WHERE run_id = ?1`,
			runID, epoch, now); err != nil {
			return err
		}
		return sqliteRefreshRunBest(ctx, tx, runID, now)
	})
	if err != nil {
		return fmt.Errorf("record epoch %d of run %s: %w", epoch, runID, sqliteClassify(err))
	}
	return nil
}

func scanEpoch(row scanner) (metadata.Epoch, error) {
	var e metadata.Epoch
	var metrics string
	var recorded int64
	if err := row.Scan(&e.RunID, &e.Epoch, &e.Loss, &e.GradNorm, &e.EnvSteps, &e.GlobalStep, &e.ValidSharpe,
		&e.DurationMS, &metrics, &recorded); err != nil {
		return metadata.Epoch{}, err
	}
	if err := json.Unmarshal([]byte(metrics), &e.Metrics); err != nil {
		return metadata.Epoch{}, fmt.Errorf("epoch %d metrics: %w", e.Epoch, err)
	}
	e.RecordedAt = fromNanos(recorded)
	return e, nil
}

// ListEpochs is Store.ListEpochs.
func (s *SQLite) ListEpochs(ctx context.Context, runID string) ([]metadata.Epoch, error) {
	epochs, err := sqliteRunRows(ctx, s.db, runID, scanEpoch, `
		SELECT run_id, epoch, loss, grad_norm, env_steps, global_step, valid_sharpe, duration_ms, metrics, recorded_at
		FROM epochs WHERE run_id = ? ORDER BY epoch`, runID)
	if err != nil {
		return nil, fmt.Errorf("list epochs of run %s: %w", runID, err)
	}
	return epochs, nil
}
