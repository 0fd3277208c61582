package epochloop

import "github.com/dqnflow/dqnflow/config"

// Scores track a run's validation backtests for best-checkpoint selection
// and early stopping, with Ref the caller's name of a checkpoint. The
// workflow keeps them in its state (it commits them epoch by epoch); the
// loop applies the same rules to the epochs it runs, so that the two
// agree on which epochs are checkpointed.
type Scores[Ref any] struct {
	// BestEpoch is the epoch with the highest validation Sharpe so far
	// (the earlier on a tie), 0 before the first backtest.
	BestEpoch       int     `json:"best_epoch,omitempty"`
	BestValidSharpe float64 `json:"best_valid_sharpe,omitempty"`
	BestCheckpoint  *Ref    `json:"best_checkpoint,omitempty"`
	// SinceBest counts the backtests after BestEpoch that did not beat it;
	// the run stops early when it reaches backtest.patience.
	SinceBest int `json:"since_best,omitempty"`
	// LastEpoch and LastValidSharpe are the most recent backtest.
	LastEpoch       int     `json:"last_epoch,omitempty"`
	LastValidSharpe float64 `json:"last_valid_sharpe,omitempty"`
}

// Add returns the scores after epoch e's validation backtest scored
// sharpe, and whether the patience (backtests in a row without a new best;
// 0 means no early stopping) is exhausted. A Sharpe that only ties the
// best does not replace it. BestCheckpoint is left to the caller, who
// checkpoints a new best (MustCheckpoint).
func (sc Scores[Ref]) Add(e int, sharpe float64, patience int) (Scores[Ref], bool) {
	sc.LastEpoch, sc.LastValidSharpe = e, sharpe
	if sc.BestEpoch == 0 || sharpe > sc.BestValidSharpe {
		sc.BestEpoch, sc.BestValidSharpe, sc.SinceBest = e, sharpe, 0
		return sc, false
	}
	sc.SinceBest++
	return sc, patience > 0 && sc.SinceBest >= patience
}

// MustCheckpoint reports whether epoch e must be checkpointed after its
// backtest gave sc (and early): a new best and the weights a run stops
// with are always on disk, whatever checkpoint.every says.
func (sc Scores[Ref]) MustCheckpoint(e int, early bool) bool {
	return sc.BestEpoch == e || early
}

// Due reports whether cfg's cadences ask for a checkpoint and a validation
// backtest at the end of epoch e. The run's last epoch always has both.
func Due(cfg config.RunConfig, e int) (checkpoint, backtest bool) {
	final := e == cfg.Epochs
	return final || e%cfg.Checkpoint.Every == 0, final || e%cfg.Backtest.Every == 0
}
