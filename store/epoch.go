package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dqnflow/dqnflow/metadata"
)

// RecordEpoch records the metrics of epoch (from 1) of a run and raises the
// run's epochs_done to epoch if it is lower.
//
// Retry: the row is overwritten with the latest values, which describe the
// training that continues (a resumed run that trains an epoch again
// overwrites it); a nil ValidSharpe keeps the recorded one. epochs_done
// never goes down.
func (s *Store) RecordEpoch(ctx context.Context, runID string, epoch int, m metadata.EpochMetrics) error {
	metrics, err := validEpochMetrics(epoch, m)
	if err != nil {
		return fmt.Errorf("record epoch %d of run %s: %w", epoch, runID, err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockRun(ctx, tx, runID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO epochs AS e (run_id, epoch, loss, grad_norm, env_steps, global_step, valid_sharpe, duration_ms, metrics)
			VALUES ($1, $2, $3, $4, $5, $6,
				COALESCE($7, (SELECT sharpe FROM backtests WHERE run_id = $1 AND epoch = $2 AND split = 'valid')),
				$8, $9)
			ON CONFLICT (run_id, epoch) DO UPDATE SET
				loss = EXCLUDED.loss, grad_norm = EXCLUDED.grad_norm,
				env_steps = EXCLUDED.env_steps, global_step = EXCLUDED.global_step,
				valid_sharpe = COALESCE($7, e.valid_sharpe),
				duration_ms = EXCLUDED.duration_ms, metrics = EXCLUDED.metrics,
				recorded_at = now()`,
			runID, epoch, m.Loss, m.GradNorm, m.EnvSteps, m.GlobalStep, score(m.ValidSharpe), m.DurationMS, metrics); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE runs SET epochs_done = GREATEST(epochs_done, $2), updated_at = now()
			WHERE run_id = $1`, runID, epoch); err != nil {
			return err
		}
		return refreshRunBest(ctx, tx, runID)
	})
	if err != nil {
		return fmt.Errorf("record epoch %d of run %s: %w", epoch, runID, classify(err))
	}
	return nil
}

// ListEpochs returns the run's recorded epochs in order.
func (s *Store) ListEpochs(ctx context.Context, runID string) ([]metadata.Epoch, error) {
	epochs, err := runRows[metadata.Epoch](ctx, s, runID, `
		SELECT run_id, epoch, loss, grad_norm, env_steps, global_step, valid_sharpe, duration_ms, metrics, recorded_at
		FROM epochs WHERE run_id = $1 ORDER BY epoch`, runID)
	if err != nil {
		return nil, fmt.Errorf("list epochs of run %s: %w", runID, err)
	}
	return epochs, nil
}

// validEpochMetrics checks epoch and the fields of m that every store
// reads and returns m's metrics as JSON.
func validEpochMetrics(epoch int, m metadata.EpochMetrics) ([]byte, error) {
	if err := validEpoch(epoch); err != nil {
		return nil, err
	}
	metrics, err := metricsJSON(m.Metrics)
	if err == nil {
		err = checkFinite("loss", m.Loss)
	}
	if err == nil {
		err = checkFinite("grad_norm", m.GradNorm)
	}
	if err == nil && (m.EnvSteps < 0 || m.GlobalStep < 0 || m.DurationMS < 0) {
		err = fmt.Errorf("%w: negative env_steps, global_step or duration_ms", metadata.ErrInvalid)
	}
	return metrics, err
}

func validEpoch(epoch int) error {
	if epoch < 1 {
		return fmt.Errorf("%w: epoch %d, epochs are numbered from 1", metadata.ErrInvalid, epoch)
	}
	return nil
}
