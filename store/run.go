package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
)

const runColumns = `run_id, COALESCE(workflow_id, run_id) AS workflow_id, COALESCE(execution_id, '') AS execution_id, lineage, COALESCE(parent_run_id, '') AS parent_run_id, config, status,
	backend, device, precision, epochs_done, best_epoch, best_valid_sharpe,
	COALESCE(error, '') AS error, created_at, updated_at, finished_at`

// CreateRun records a run with status running and returns the stored row.
//
// With an execution id, the run is keyed on its workflow id and its first
// execution: the first execution under a workflow id gets the run id
// r.RunID, a later one "<r.RunID>.<r.ExecutionID>" (its own rows, its own
// lineage unless r.Lineage names one), so that it never writes over an
// earlier run's rows or checkpoints. Without one, the run is keyed on
// r.RunID alone (runs recorded before execution ids were).
//
// Retry: when the run already exists (a retried activity, a Continue-As-New
// of the same execution) the row keeps its lineage, parent, config, status
// and creation time; only updated_at moves. The returned Run is the stored
// one, and its RunID is the key every later call must use.
func (s *Store) CreateRun(ctx context.Context, r metadata.NewRun) (metadata.Run, error) {
	if r.RunID == "" {
		return metadata.Run{}, fmt.Errorf("create run: %w: empty run id", metadata.ErrInvalid)
	}
	cfg, err := jsonObject("config", r.Config)
	if err != nil || len(r.Config) == 0 {
		return metadata.Run{}, fmt.Errorf("create run %s: %w: config must be the RunConfig JSON object", r.RunID, metadata.ErrInvalid)
	}
	if r.ExecutionID == "" {
		lineage := r.Lineage
		if lineage == "" {
			lineage = r.RunID
		}
		rows, _ := s.pool.Query(ctx, `
			INSERT INTO runs (run_id, workflow_id, lineage, parent_run_id, config)
			VALUES ($1, $1, $2, NULLIF($3, ''), $4)
			ON CONFLICT (run_id) DO UPDATE SET updated_at = now()
			RETURNING `+runColumns,
			r.RunID, lineage, r.ParentRunID, cfg)
		run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[metadata.Run])
		if err != nil {
			return metadata.Run{}, fmt.Errorf("create run %s: %w", r.RunID, classify(err))
		}
		return run, nil
	}
	var run metadata.Run
	err = s.tx(ctx, func(tx pgx.Tx) error {
		// The workflow id if it is free, else one suffixed with the
		// execution id; an insert that meets any existing key does nothing,
		// and the row of this execution is read back at the end, whoever
		// (this call or a concurrent retry) wrote it.
		for _, id := range []string{r.RunID, r.RunID + "." + r.ExecutionID} {
			lineage := r.Lineage
			if lineage == "" {
				lineage = id
			}
			if _, err := tx.Exec(ctx, `
				INSERT INTO runs (run_id, workflow_id, execution_id, lineage, parent_run_id, config)
				VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6)
				ON CONFLICT DO NOTHING`,
				id, r.RunID, r.ExecutionID, lineage, r.ParentRunID, cfg); err != nil {
				return err
			}
			rows, _ := tx.Query(ctx, `
				UPDATE runs SET updated_at = now() WHERE workflow_id = $1 AND execution_id = $2
				RETURNING `+runColumns, r.RunID, r.ExecutionID)
			found, err := pgx.CollectRows(rows, pgx.RowToStructByName[metadata.Run])
			if err != nil {
				return err
			}
			if len(found) == 1 {
				run = found[0]
				return nil
			}
		}
		return fmt.Errorf("%w: run ids %s and %s.%s are both taken by other executions", metadata.ErrInvalid, r.RunID, r.RunID, r.ExecutionID)
	})
	if err != nil {
		return metadata.Run{}, fmt.Errorf("create run %s (execution %s): %w", r.RunID, r.ExecutionID, classify(err))
	}
	return run, nil
}

// SetRunStatus sets the run's status and error text (empty clears it). A
// terminal status sets finished_at; a live one clears it, so a run that is
// started again under the same id is live again. The text is stored as
// errtext.Clean makes it (valid UTF-8, no NUL, at most errtext.Limit
// bytes), so that whatever an error quoted, the write lands: PostgreSQL
// refuses a NUL in text with SQLSTATE 22021.
//
// Retry: setting the status the run already has keeps finished_at, so the
// finish time is the first attempt's.
func (s *Store) SetRunStatus(ctx context.Context, runID string, status metadata.Status, errText string) error {
	if !status.Valid() {
		return fmt.Errorf("set run %s status: %w: unknown status %q", runID, metadata.ErrInvalid, status)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE runs SET
			status = $2,
			error = NULLIF($3, ''),
			finished_at = CASE WHEN NOT $4 THEN NULL
			                   WHEN status = $2 THEN COALESCE(finished_at, now())
			                   ELSE now() END,
			updated_at = now()
		WHERE run_id = $1`,
		runID, status, errtext.Clean(errText), status.Terminal())
	if err != nil {
		return fmt.Errorf("set run %s status %s: %w", runID, status, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set run %s status %s: run %w", runID, status, metadata.ErrNotFound)
	}
	return nil
}

// SetRunDevice records what the trainer reports it runs (trainer.Info's
// Backend, Device and Precision). After a resume on another worker the row
// describes the latest one.
//
// Retry: writes the same values again.
func (s *Store) SetRunDevice(ctx context.Context, runID, backend, device, precision string) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE runs SET backend = $2, device = $3, precision = $4, updated_at = now()
		WHERE run_id = $1`,
		runID, backend, device, precision)
	if err != nil {
		return fmt.Errorf("set run %s device: %w", runID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set run %s device: run %w", runID, metadata.ErrNotFound)
	}
	return nil
}

// GetRun returns one run.
func (s *Store) GetRun(ctx context.Context, runID string) (metadata.Run, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID)
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[metadata.Run])
	if errors.Is(err, pgx.ErrNoRows) {
		return metadata.Run{}, fmt.Errorf("get run %s: %w", runID, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return run, nil
}

// RunFilter selects runs for ListRuns; zero fields select everything.
type RunFilter struct {
	Lineage string
	Status  metadata.Status
	Limit   int // most runs to return; 0 means no limit
}

// ListRuns returns the runs that match f, newest first.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]metadata.Run, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list runs: %w: limit %d is negative", metadata.ErrInvalid, f.Limit)
	}
	rows, _ := s.pool.Query(ctx, `
		SELECT `+runColumns+` FROM runs
		WHERE ($1 = '' OR lineage = $1) AND ($2 = '' OR status = $2)
		ORDER BY created_at DESC, run_id
		LIMIT NULLIF($3, 0)`,
		f.Lineage, string(f.Status), f.Limit)
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[metadata.Run])
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// refreshRunBest sets the run's best_epoch and best_valid_sharpe from every
// validation score recorded for it (epochs and "valid" backtests): the
// highest, the earliest epoch on a tie.
func refreshRunBest(ctx context.Context, tx pgx.Tx, runID string) error {
	_, err := tx.Exec(ctx, `
		WITH top AS (
			SELECT epoch, s FROM (
				SELECT epoch, valid_sharpe AS s FROM epochs WHERE run_id = $1 AND valid_sharpe IS NOT NULL
				UNION ALL
				SELECT epoch, sharpe FROM backtests WHERE run_id = $1 AND split = 'valid' AND sharpe IS NOT NULL
			) scores
			ORDER BY s DESC, epoch
			LIMIT 1
		)
		UPDATE runs SET
			best_epoch = (SELECT epoch FROM top),
			best_valid_sharpe = (SELECT s FROM top),
			updated_at = now()
		WHERE run_id = $1`, runID)
	return err
}
