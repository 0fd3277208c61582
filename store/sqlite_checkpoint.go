package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dqnflow/dqnflow/metadata"
)

func scanCheckpoint(row scanner) (metadata.CheckpointRecord, error) {
	var c metadata.CheckpointRecord
	var metrics string
	var prunedAt sql.NullInt64
	var created int64
	if err := row.Scan(&c.ID, &c.RunID, &c.Epoch, &c.URI, &c.SHA256, &c.Bytes, &c.GlobalStep, &metrics,
		&c.ValidSharpe, &c.IsBest, &c.Pruned, &prunedAt, &created); err != nil {
		return metadata.CheckpointRecord{}, err
	}
	if err := json.Unmarshal([]byte(metrics), &c.Metrics); err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("checkpoint %d metrics: %w", c.ID, err)
	}
	c.PrunedAt, c.CreatedAt = nullTime(prunedAt), fromNanos(created)
	return c, nil
}

// RecordCheckpoint is Store.RecordCheckpoint.
func (s *SQLite) RecordCheckpoint(ctx context.Context, c metadata.CheckpointRecord) (metadata.CheckpointRecord, error) {
	c.SHA256 = strings.ToLower(c.SHA256)
	metrics, err := validCheckpoint(c)
	if err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("record checkpoint %s epoch %d: %w", c.RunID, c.Epoch, err)
	}
	now := nanos(s.now())
	var out metadata.CheckpointRecord
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if err := sqliteEnsureRun(ctx, tx, c.RunID); err != nil {
			return err
		}
		var id int64
		// In an upsert's SET, a bare column is the stored row's value.
		if err := tx.QueryRowContext(ctx, `
			INSERT INTO checkpoints (run_id, epoch, uri, sha256, bytes, global_step, metrics, valid_sharpe, created_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,
				COALESCE(?8, (SELECT sharpe FROM backtests WHERE run_id = ?1 AND epoch = ?2 AND split = 'valid')), ?9)
			ON CONFLICT (run_id, epoch) DO UPDATE SET
				uri = excluded.uri, sha256 = excluded.sha256, bytes = excluded.bytes,
				global_step = excluded.global_step, metrics = excluded.metrics,
				valid_sharpe = CASE WHEN sha256 = excluded.sha256 THEN COALESCE(?8, valid_sharpe) ELSE ?8 END,
				created_at = CASE WHEN sha256 = excluded.sha256 THEN created_at ELSE excluded.created_at END,
				pruned = 0, pruned_at = NULL
			RETURNING id`,
			c.RunID, c.Epoch, c.URI, c.SHA256, c.Bytes, c.GlobalStep, string(metrics), score(c.ValidSharpe), now).Scan(&id); err != nil {
			return err
		}
		if err := sqliteMarkBest(ctx, tx, c.RunID); err != nil {
			return err
		}
		var err error
		out, err = scanCheckpoint(tx.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("record checkpoint %s epoch %d: %w", c.RunID, c.Epoch, sqliteClassify(err))
	}
	return out, nil
}

// sqliteMarkBest is markBest.
func sqliteMarkBest(ctx context.Context, tx *sql.Tx, runID string) error {
	var best sql.NullInt64
	err := tx.QueryRowContext(ctx, `
		SELECT id FROM checkpoints
		WHERE run_id = ? AND NOT pruned AND valid_sharpe IS NOT NULL
		ORDER BY valid_sharpe DESC, epoch
		LIMIT 1`, runID).Scan(&best)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if _, err := tx.ExecContext(ctx, `
		UPDATE checkpoints SET is_best = 0
		WHERE run_id = ?1 AND is_best AND id IS NOT ?2`, runID, best); err != nil {
		return err
	}
	if !best.Valid {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE checkpoints SET is_best = 1 WHERE id = ? AND NOT is_best`, best.Int64)
	return err
}

// ListCheckpoints is Store.ListCheckpoints.
func (s *SQLite) ListCheckpoints(ctx context.Context, runID string) ([]metadata.CheckpointRecord, error) {
	cps, err := sqliteRunRows(ctx, s.db, runID, scanCheckpoint,
		`SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = ? ORDER BY epoch`, runID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of run %s: %w", runID, sqliteClassify(err))
	}
	return cps, nil
}

// GetCheckpoint is Store.GetCheckpoint.
func (s *SQLite) GetCheckpoint(ctx context.Context, runID string, epoch int) (metadata.CheckpointRecord, error) {
	return s.oneCheckpoint(ctx, fmt.Sprintf("checkpoint of run %s epoch %d", runID, epoch),
		`SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = ? AND epoch = ?`, runID, epoch)
}

// LatestCheckpoint is Store.LatestCheckpoint.
func (s *SQLite) LatestCheckpoint(ctx context.Context, runID string) (metadata.CheckpointRecord, error) {
	return s.oneCheckpoint(ctx, "latest checkpoint of run "+runID, `
		SELECT `+checkpointColumns+` FROM checkpoints
		WHERE run_id = ? AND NOT pruned ORDER BY epoch DESC LIMIT 1`, runID)
}

// BestCheckpoint is Store.BestCheckpoint.
func (s *SQLite) BestCheckpoint(ctx context.Context, runID string) (metadata.CheckpointRecord, error) {
	return s.oneCheckpoint(ctx, "best checkpoint of run "+runID,
		`SELECT `+checkpointColumns+` FROM checkpoints WHERE run_id = ? AND is_best`, runID)
}

func (s *SQLite) oneCheckpoint(ctx context.Context, what, query string, args ...any) (metadata.CheckpointRecord, error) {
	c, err := scanCheckpoint(s.db.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.CheckpointRecord{}, fmt.Errorf("%s: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.CheckpointRecord{}, fmt.Errorf("%s: %w", what, sqliteClassify(err))
	}
	return c, nil
}

// Retention is Store.Retention.
func (s *SQLite) Retention(ctx context.Context, runID string, keepLast, keepBest int) ([]metadata.CheckpointRecord, error) {
	if err := validRetention(keepLast, keepBest); err != nil {
		return nil, fmt.Errorf("retention of run %s: %w", runID, err)
	}
	cps, err := sqliteRunRows(ctx, s.db, runID, scanCheckpoint, `
		WITH live AS (
			SELECT id,
				row_number() OVER (ORDER BY epoch DESC) AS recent_rank,
				CASE WHEN valid_sharpe IS NOT NULL
					THEN row_number() OVER (ORDER BY valid_sharpe DESC NULLS LAST, epoch) END AS score_rank
			FROM checkpoints WHERE run_id = ?1 AND NOT pruned
		)
		SELECT `+checkpointColumns+` FROM checkpoints
		WHERE id IN (SELECT id FROM live WHERE recent_rank > ?2 AND (score_rank IS NULL OR score_rank > ?3))
		ORDER BY epoch`, runID, keepLast, keepBest)
	if err != nil {
		return nil, fmt.Errorf("retention of run %s: %w", runID, sqliteClassify(err))
	}
	return cps, nil
}

// MarkPruned is Store.MarkPruned.
func (s *SQLite) MarkPruned(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	now := nanos(s.now())
	err := s.tx(ctx, func(tx *sql.Tx) error {
		runs := map[string]bool{}
		var missing []int64
		for _, id := range ids {
			var runID string
			err := tx.QueryRowContext(ctx, `SELECT run_id FROM checkpoints WHERE id = ?`, id).Scan(&runID)
			if errors.Is(err, sql.ErrNoRows) {
				missing = append(missing, id)
				continue
			}
			if err != nil {
				return err
			}
			runs[runID] = true
		}
		if len(missing) > 0 {
			return fmt.Errorf("checkpoints %v: %w", missing, metadata.ErrNotFound)
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `
				UPDATE checkpoints SET pruned = 1, pruned_at = ?2, is_best = 0 WHERE id = ?1 AND NOT pruned`, id, now); err != nil {
				return err
			}
		}
		for runID := range runs {
			if err := sqliteMarkBest(ctx, tx, runID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark checkpoints %v pruned: %w", ids, sqliteClassify(err))
	}
	return nil
}

func scanBacktest(row scanner) (metadata.BacktestRecord, error) {
	var b metadata.BacktestRecord
	var from, to, created int64
	var report string
	if err := row.Scan(&b.ID, &b.RunID, &b.Epoch, &b.Split, &b.CheckpointID, &from, &to, &report,
		&b.Sharpe, &b.TotalReturn, &b.MaxDrawdown, &created); err != nil {
		return metadata.BacktestRecord{}, err
	}
	b.DataFrom, b.DataTo, b.CreatedAt = fromNanos(from), fromNanos(to), fromNanos(created)
	b.Report = json.RawMessage(report)
	return b, nil
}

// RecordBacktest is Store.RecordBacktest.
func (s *SQLite) RecordBacktest(ctx context.Context, b metadata.BacktestRecord) (metadata.BacktestRecord, error) {
	report, err := validBacktest(b)
	if err != nil {
		return metadata.BacktestRecord{}, fmt.Errorf("record backtest %s epoch %d split %s: %w", b.RunID, b.Epoch, b.Split, err)
	}
	now := nanos(s.now())
	var out metadata.BacktestRecord
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if err := sqliteEnsureRun(ctx, tx, b.RunID); err != nil {
			return err
		}
		var err error
		out, err = scanBacktest(tx.QueryRowContext(ctx, `
			INSERT INTO backtests (run_id, epoch, split, checkpoint_id, data_from, data_to, report, sharpe, total_return, max_drawdown, created_at)
			VALUES (?1, ?2, ?3,
				COALESCE(?4, (SELECT id FROM checkpoints WHERE run_id = ?1 AND epoch = ?2)),
				?5, ?6, ?7, ?8, ?9, ?10, ?11)
			ON CONFLICT (run_id, epoch, split) DO UPDATE SET
				checkpoint_id = excluded.checkpoint_id, data_from = excluded.data_from, data_to = excluded.data_to,
				report = excluded.report, sharpe = excluded.sharpe,
				total_return = excluded.total_return, max_drawdown = excluded.max_drawdown
			RETURNING `+backtestColumns,
			b.RunID, b.Epoch, b.Split, b.CheckpointID, nanos(b.DataFrom), nanos(b.DataTo), string(report),
			score(b.Sharpe), b.TotalReturn, b.MaxDrawdown, now))
		if err != nil || b.Split != metadata.SplitValid {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE epochs SET valid_sharpe = ?3 WHERE run_id = ?1 AND epoch = ?2`,
			b.RunID, b.Epoch, out.Sharpe); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE checkpoints SET valid_sharpe = ?3 WHERE run_id = ?1 AND epoch = ?2`,
			b.RunID, b.Epoch, out.Sharpe); err != nil {
			return err
		}
		if err := sqliteMarkBest(ctx, tx, b.RunID); err != nil {
			return err
		}
		return sqliteRefreshRunBest(ctx, tx, b.RunID, now)
	})
	if err != nil {
		return metadata.BacktestRecord{}, fmt.Errorf("record backtest %s epoch %d split %s: %w", b.RunID, b.Epoch, b.Split, sqliteClassify(err))
	}
	return out, nil
}

// ListBacktests is Store.ListBacktests.
func (s *SQLite) ListBacktests(ctx context.Context, runID string) ([]metadata.BacktestRecord, error) {
	bts, err := sqliteRunRows(ctx, s.db, runID, scanBacktest,
		`SELECT `+backtestColumns+` FROM backtests WHERE run_id = ? ORDER BY epoch, split`, runID)
	if err != nil {
		return nil, fmt.Errorf("list backtests of run %s: %w", runID, sqliteClassify(err))
	}
	return bts, nil
}

const sqlitePromotionColumns = `id, lineage, retrain_run_id, challenger_run_id, challenger_checkpoint_uri,
	challenger_score, COALESCE(incumbent_run_id, ''), COALESCE(incumbent_checkpoint_uri, ''), incumbent_score,
	promoted, reason, decided_at`

func scanPromotion(row scanner) (metadata.Promotion, error) {
	var p metadata.Promotion
	var decided int64
	if err := row.Scan(&p.ID, &p.Lineage, &p.RetrainRunID, &p.ChallengerRunID, &p.ChallengerCheckpointURI,
		&p.ChallengerScore, &p.IncumbentRunID, &p.IncumbentCheckpointURI, &p.IncumbentScore,
		&p.Promoted, &p.Reason, &decided); err != nil {
		return metadata.Promotion{}, err
	}
	p.DecidedAt = fromNanos(decided)
	return p, nil
}

// RecordPromotion is Store.RecordPromotion. The IMMEDIATE transaction
// serialises it with every other write, the lineage's promotions included.
func (s *SQLite) RecordPromotion(ctx context.Context, p metadata.Promotion) (metadata.Promotion, error) {
	if err := validPromotion(p); err != nil {
		return metadata.Promotion{}, fmt.Errorf("record promotion of retrain %s: %w", p.RetrainRunID, err)
	}
	now := nanos(s.now())
	var out metadata.Promotion
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = decidePromotion(p, promotionTx{
			noRows: sql.ErrNoRows,
			recorded: func() (metadata.Promotion, error) {
				return scanPromotion(tx.QueryRowContext(ctx, `SELECT `+sqlitePromotionColumns+` FROM promotions WHERE retrain_run_id = ?`, p.RetrainRunID))
			},
			lineageOf: func(runID string) (lineage string, err error) {
				err = tx.QueryRowContext(ctx, `SELECT lineage FROM runs WHERE run_id = ?`, runID).Scan(&lineage)
				return lineage, err
			},
			champion: func(lineage string) (metadata.Champion, error) { return sqliteChampion(ctx, tx, lineage) },
			insert: func(p metadata.Promotion) error {
				_, err := tx.ExecContext(ctx, `
			INSERT INTO promotions (lineage, retrain_run_id, challenger_run_id, challenger_checkpoint_uri,
				challenger_score, incumbent_run_id, incumbent_checkpoint_uri, incumbent_score, promoted, reason, decided_at)
			VALUES (?1, ?2, ?3, ?4, ?5, NULLIF(?6, ''), NULLIF(?7, ''), ?8, ?9, ?10, ?11)`,
					p.Lineage, p.RetrainRunID, p.ChallengerRunID, p.ChallengerCheckpointURI, score(p.ChallengerScore),
					p.IncumbentRunID, p.IncumbentCheckpointURI, score(p.IncumbentScore), p.Promoted, p.Reason, now)
				return err
			},
		})
		return err
	})
	if err != nil {
		return metadata.Promotion{}, fmt.Errorf("record promotion of retrain %s: %w", p.RetrainRunID, sqliteClassify(err))
	}
	return out, nil
}

// Champion is Store.Champion.
func (s *SQLite) Champion(ctx context.Context, lineage string) (metadata.Champion, error) {
	c, err := sqliteChampion(ctx, s.db, lineage)
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.Champion{}, fmt.Errorf("champion of lineage %s: %w", lineage, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.Champion{}, fmt.Errorf("champion of lineage %s: %w", lineage, sqliteClassify(err))
	}
	return c, nil
}

// sqliteChampion is champion: the challenger of the lineage's latest
// promotion, else the best checkpoint of its first run; sql.ErrNoRows when
// it has neither.
func sqliteChampion(ctx context.Context, q querier, lineage string) (metadata.Champion, error) {
	var c metadata.Champion
	var since int64
	err := q.QueryRowContext(ctx, `
		SELECT p.lineage, p.challenger_run_id, p.challenger_checkpoint_uri,
			COALESCE(c.sha256, ''), COALESCE(c.epoch, 0), COALESCE(c.global_step, 0),
			p.challenger_score, p.id, p.decided_at
		FROM promotions p LEFT JOIN checkpoints c
			ON c.run_id = p.challenger_run_id AND c.uri = p.challenger_checkpoint_uri
		WHERE p.lineage = ? AND p.promoted
		ORDER BY p.decided_at DESC, p.id DESC LIMIT 1`, lineage).Scan(
		&c.Lineage, &c.RunID, &c.CheckpointURI, &c.CheckpointSHA256, &c.CheckpointEpoch, &c.CheckpointStep,
		&c.Score, &c.PromotionID, &since)
	if errors.Is(err, sql.ErrNoRows) {
		err = q.QueryRowContext(ctx, `
			SELECT r.lineage, r.run_id, c.uri, c.sha256, c.epoch, c.global_step, c.valid_sharpe, 0, r.created_at
			FROM runs r JOIN checkpoints c ON c.run_id = r.run_id AND c.is_best
			WHERE r.lineage = ? AND r.parent_run_id IS NULL
			ORDER BY r.created_at, r.run_id LIMIT 1`, lineage).Scan(
			&c.Lineage, &c.RunID, &c.CheckpointURI, &c.CheckpointSHA256, &c.CheckpointEpoch, &c.CheckpointStep,
			&c.Score, &c.PromotionID, &since)
	}
	if err != nil {
		return metadata.Champion{}, err
	}
	c.Since = fromNanos(since)
	return c, nil
}
