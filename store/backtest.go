package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

// backtestColumns are the columns of a backtest row, for both stores:
// *Store reads them by name, scanBacktest (*SQLite) in this order.
const backtestColumns = `id, run_id, epoch, split, checkpoint_id, data_from, data_to, report,
	sharpe, total_return, max_drawdown, created_at`

// RecordBacktest records a backtest and returns the stored row. A "valid"
// backtest is the epoch's validation score: it is copied to the epoch's
// metrics and checkpoint (when recorded), the run's best checkpoint flag and
// best epoch follow it.
//
// Retry: there is one row per run, epoch and split; a retry overwrites it
// with its values (the same ones, for a deterministic backtest of the same
// weights), keeping its id and creation time.
func (s *Store) RecordBacktest(ctx context.Context, b metadata.BacktestRecord) (metadata.BacktestRecord, error) {
	report, err := validBacktest(b)
	if err != nil {
		return metadata.BacktestRecord{}, fmt.Errorf("record backtest %s epoch %d split %s: %w", b.RunID, b.Epoch, b.Split, err)
	}
	var out metadata.BacktestRecord
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockRun(ctx, tx, b.RunID); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `
			INSERT INTO backtests AS b (run_id, epoch, split, checkpoint_id, data_from, data_to, report, sharpe, total_return, max_drawdown)
			VALUES ($1, $2, $3,
				COALESCE($4, (SELECT id FROM checkpoints WHERE run_id = $1 AND epoch = $2)),
				$5, $6, $7, $8, $9, $10)
			ON CONFLICT (run_id, epoch, split) DO UPDATE SET
				checkpoint_id = EXCLUDED.checkpoint_id, data_from = EXCLUDED.data_from, data_to = EXCLUDED.data_to,
				report = EXCLUDED.report, sharpe = EXCLUDED.sharpe,
				total_return = EXCLUDED.total_return, max_drawdown = EXCLUDED.max_drawdown
			RETURNING `+backtestColumns,
			b.RunID, b.Epoch, b.Split, b.CheckpointID, b.DataFrom, b.DataTo, report,
			score(b.Sharpe), b.TotalReturn, b.MaxDrawdown)
		var err error
		if out, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[metadata.BacktestRecord]); err != nil {
			return err
		}
		if b.Split != metadata.SplitValid {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE epochs SET valid_sharpe = $3 WHERE run_id = $1 AND epoch = $2`,
			b.RunID, b.Epoch, out.Sharpe); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE checkpoints SET valid_sharpe = $3 WHERE run_id = $1 AND epoch = $2`,
			b.RunID, b.Epoch, out.Sharpe); err != nil {
			return err
		}
		if err := markBest(ctx, tx, b.RunID); err != nil {
			return err
		}
		return refreshRunBest(ctx, tx, b.RunID)
	})
	if err != nil {
		return metadata.BacktestRecord{}, fmt.Errorf("record backtest %s epoch %d split %s: %w", b.RunID, b.Epoch, b.Split, classify(err))
	}
	return out, nil
}

// validBacktest checks the fields of b that every store reads and returns
// its report as a JSON object.
func validBacktest(b metadata.BacktestRecord) ([]byte, error) {
	report, err := jsonObject("report", b.Report)
	switch {
	case err != nil:
	case b.RunID == "" || b.Split == "":
		err = fmt.Errorf("%w: empty run id or split", metadata.ErrInvalid)
	case b.DataFrom.IsZero() || b.DataTo.IsZero() || b.DataTo.Before(b.DataFrom):
		err = fmt.Errorf("%w: data range %s to %s", metadata.ErrInvalid, b.DataFrom, b.DataTo)
	default:
		err = validEpoch(b.Epoch)
	}
	if err == nil {
		err = checkFinite("total_return", b.TotalReturn)
	}
	if err == nil {
		err = checkFinite("max_drawdown", b.MaxDrawdown)
	}
	return report, err
}

// ListBacktests returns the run's backtests by epoch and split.
func (s *Store) ListBacktests(ctx context.Context, runID string) ([]metadata.BacktestRecord, error) {
	bts, err := runRows[metadata.BacktestRecord](ctx, s, runID,
		`SELECT `+backtestColumns+` FROM backtests WHERE run_id = $1 ORDER BY epoch, split`, runID)
	if err != nil {
		return nil, fmt.Errorf("list backtests of run %s: %w", runID, classify(err))
	}
	return bts, nil
}
