package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

// checkpointColumns are the columns of a checkpoint row, for both stores:
// *Store reads them by name, scanCheckpoint (*SQLite) in this order.
const checkpointColumns = `id, run_id, epoch, uri, sha256, bytes, global_step, metrics,
	valid_sharpe, is_best, pruned, pruned_at, created_at`

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// RecordCheckpoint records a checkpoint blob once it is durably written and
// returns the stored row (with its ID and best flag). Only RunID, Epoch, URI,
// SHA256, Bytes, GlobalStep, Metrics and ValidSharpe are read from c. When
// ValidSharpe is nil and a "valid" backtest of the epoch exists, its Sharpe
// is used.
//
// Retry: there is one row per run and epoch, and it describes the blob
// written last, because that is the blob at the URI, the one a load verifies:
//   - same SHA-256 (a retry after the row was written, or a deterministic
//     re-run): the row keeps its id, score and creation time; a pruned row is
//     marked unpruned, since the blob was just written again;
//   - another SHA-256 (a non-deterministic backend re-trained the epoch after
//     a resume): uri, sha256, bytes, step and metrics are replaced, the score
//     becomes c.ValidSharpe (the old one rated other weights), and the best
//     flag is recomputed.
func (s *Store) RecordCheckpoint(ctx context.Context, c metadata.CheckpointRecord) (metadata.CheckpointRecord, error) {
	c.SHA256 = strings.ToLower(c.SHA256)
	metrics, err := validCheckpoint(c)
	if err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("record checkpoint %s epoch %d: %w", c.RunID, c.Epoch, err)
	}
	var out metadata.CheckpointRecord
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockRun(ctx, tx, c.RunID); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRow(ctx, `
			INSERT INTO checkpoints AS c (run_id, epoch, uri, sha256, bytes, global_step, metrics, valid_sharpe)
			VALUES ($1, $2, $3, $4, $5, $6, $7,
				COALESCE($8, (SELECT sharpe FROM backtests WHERE run_id = $1 AND epoch = $2 AND split = 'valid')))
			ON CONFLICT (run_id, epoch) DO UPDATE SET
				uri = EXCLUDED.uri, sha256 = EXCLUDED.sha256, bytes = EXCLUDED.bytes,
				global_step = EXCLUDED.global_step, metrics = EXCLUDED.metrics,
				valid_sharpe = CASE WHEN c.sha256 = EXCLUDED.sha256 THEN COALESCE($8, c.valid_sharpe) ELSE $8 END,
				created_at = CASE WHEN c.sha256 = EXCLUDED.sha256 THEN c.created_at ELSE now() END,
				pruned = false, pruned_at = NULL
			RETURNING id`,
			c.RunID, c.Epoch, c.URI, c.SHA256, c.Bytes, c.GlobalStep, metrics, score(c.ValidSharpe)).Scan(&id); err != nil {
			return err
		}
		if err := markBest(ctx, tx, c.RunID); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = $1`, id)
		var err error
		out, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[metadata.CheckpointRecord])
		return err
	})
	if err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("record checkpoint %s epoch %d: %w", c.RunID, c.Epoch, classify(err))
	}
	return out, nil
}

// validCheckpoint checks the fields of c that every store reads and
// returns its metrics as JSON.
func validCheckpoint(c metadata.CheckpointRecord) ([]byte, error) {
	switch {
	case c.RunID == "":
		return nil, fmt.Errorf("%w: empty run id", metadata.ErrInvalid)
	case c.URI == "":
		return nil, fmt.Errorf("%w: empty uri", metadata.ErrInvalid)
	case !sha256Hex.MatchString(c.SHA256):
		return nil, fmt.Errorf("%w: sha256 %q is not 64 hex digits", metadata.ErrInvalid, c.SHA256)
	case c.Bytes < 0 || c.GlobalStep < 0:
		return nil, fmt.Errorf("%w: negative bytes or global_step", metadata.ErrInvalid)
	}
	if err := validEpoch(c.Epoch); err != nil {
		return nil, err
	}
	return metricsJSON(c.Metrics)
}

// markBest moves the run's best flag to its unpruned checkpoint with the
// highest validation Sharpe, the earlier epoch on a tie, or clears it when no
// unpruned checkpoint has a score. The caller holds the run's lock.
func markBest(ctx context.Context, tx pgx.Tx, runID string) error {
	// Two statements, because the partial unique index on is_best is checked
	// row by row: clearing and setting in one UPDATE could see two bests.
	var best *int64
	err := tx.QueryRow(ctx, `
		SELECT id FROM checkpoints
		WHERE run_id = $1 AND NOT pruned AND valid_sharpe IS NOT NULL
		ORDER BY valid_sharpe DESC, epoch
		LIMIT 1`, runID).Scan(&best)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if _, err := tx.Exec(ctx, `
		UPDATE checkpoints SET is_best = false
		WHERE run_id = $1 AND is_best AND id IS DISTINCT FROM $2`, runID, best); err != nil {
		return err
	}
	if best == nil {
		return nil
	}
	_, err = tx.Exec(ctx, `UPDATE checkpoints SET is_best = true WHERE id = $1 AND NOT is_best`, *best)
	return err
}

// ListCheckpoints returns every checkpoint of the run, pruned ones included,
// by epoch. Like every List method it returns an empty, non-nil slice (JSON
// []) for a run without rows, and an ErrNotFound error for a missing run.
func (s *Store) ListCheckpoints(ctx context.Context, runID string) ([]metadata.CheckpointRecord, error) {
	cps, err := runRows[metadata.CheckpointRecord](ctx, s, runID,
		`SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = $1 ORDER BY epoch`, runID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, classify(err))
	}
	return cps, nil
}

// GetCheckpoint returns the checkpoint of the run's epoch, pruned or not.
func (s *Store) GetCheckpoint(ctx context.Context, runID string, epoch int) (metadata.CheckpointRecord, error) {
	return s.oneCheckpoint(ctx, fmt.Sprintf("checkpoint of run %s epoch %d", runID, epoch),
		`SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = $1 AND epoch = $2`, runID, epoch)
}

// LatestCheckpoint returns the run's unpruned checkpoint of the highest
// epoch: the one a resume restores.
func (s *Store) LatestCheckpoint(ctx context.Context, runID string) (metadata.CheckpointRecord, error) {
	return s.oneCheckpoint(ctx, "latest checkpoint of run "+runID, `
		SELECT `+checkpointColumns+` FROM checkpoints
		WHERE run_id = $1 AND NOT pruned ORDER BY epoch DESC LIMIT 1`, runID)
}

// BestCheckpoint returns the run's checkpoint marked best: the unpruned one
// with the highest validation Sharpe. A run whose checkpoints have no
// validation score yet has none (ErrNotFound).
func (s *Store) BestCheckpoint(ctx context.Context, runID string) (metadata.CheckpointRecord, error) {
	return s.oneCheckpoint(ctx, "best checkpoint of run "+runID,
		`SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = $1 AND is_best`, runID)
}

func (s *Store) oneCheckpoint(ctx context.Context, what, query string, args ...any) (metadata.CheckpointRecord, error) {
	rows, _ := s.pool.Query(ctx, query, args...)
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[metadata.CheckpointRecord])
	if errors.Is(err, pgx.ErrNoRows) {
		return metadata.CheckpointRecord{}, fmt.Errorf("%s: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("%s: %w", what, classify(err))
	}
	return c, nil
}

// Retention returns the run's checkpoints to prune, by epoch: those not yet
// pruned that are neither among the keepLast of highest epoch nor among the
// keepBest of highest validation Sharpe (the earlier epoch on a tie; a
// checkpoint without a score is never among them). Both rankings are over
// the unpruned checkpoints. keepLast must be at least 1: a resume needs the
// newest checkpoint.
//
// Retention only reads. The caller deletes the blobs, treating a blob that
// is already gone as deleted, then calls MarkPruned. A retry anywhere in
// between lists the same checkpoints again until they are marked, so
// repeating the whole sequence is safe. Call it after the validation score of
// the newest checkpoint is recorded, or that checkpoint can only be kept as
// one of the last.
func (s *Store) Retention(ctx context.Context, runID string, keepLast, keepBest int) ([]metadata.CheckpointRecord, error) {
	if err := validRetention(keepLast, keepBest); err != nil {
		return nil, fmt.Errorf("retention of run %s: %w", runID, err)
	}
	cps, err := runRows[metadata.CheckpointRecord](ctx, s, runID, `
		WITH live AS (
			SELECT id,
				row_number() OVER (ORDER BY epoch DESC) AS recent_rank,
				CASE WHEN valid_sharpe IS NOT NULL
					THEN row_number() OVER (ORDER BY valid_sharpe DESC NULLS LAST, epoch) END AS score_rank
			FROM checkpoints WHERE run_id = $1 AND NOT pruned
		)
		SELECT `+checkpointColumns+` FROM checkpoints
		WHERE id IN (SELECT id FROM live WHERE recent_rank > $2 AND (score_rank IS NULL OR score_rank > $3))
		ORDER BY epoch`, runID, keepLast, keepBest)
	if err != nil {
		return nil, fmt.Errorf("retention of run %s: %w", runID, classify(err))
	}
	return cps, nil
}

// validRetention checks Retention's counts: a resume needs the newest
// checkpoint, so keepLast is at least 1.
func validRetention(keepLast, keepBest int) error {
	if keepLast < 1 || keepBest < 0 {
		return fmt.Errorf("%w: keep_last %d must be >= 1 and keep_best %d >= 0", metadata.ErrInvalid, keepLast, keepBest)
	}
	return nil
}

// MarkPruned marks the checkpoints with these ids pruned, once their blobs
// are deleted, and moves the best flag if it was on one of them.
//
// Retry: a checkpoint already pruned keeps its pruned_at. An id that does not
// exist is an ErrNotFound error, and nothing is marked.
func (s *Store) MarkPruned(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// Lock the runs first, in a fixed order, as every other write does.
		rows, _ := tx.Query(ctx, `
			SELECT run_id FROM runs
			WHERE run_id IN (SELECT run_id FROM checkpoints WHERE id = ANY($1))
			ORDER BY run_id FOR NO KEY UPDATE`, ids)
		runIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		var missing []int64
		if err := tx.QueryRow(ctx, `
			SELECT coalesce(array_agg(id), '{}') FROM unnest($1::bigint[]) AS want(id)
			WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.id = want.id)`, ids).Scan(&missing); err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("checkpoints %v: %w", missing, metadata.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE checkpoints SET pruned = true, pruned_at = now(), is_best = false
			WHERE id = ANY($1) AND NOT pruned`, ids); err != nil {
			return err
		}
		for _, runID := range runIDs {
			if err := markBest(ctx, tx, runID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark checkpoints %v pruned: %w", ids, classify(err))
	}
	return nil
}
