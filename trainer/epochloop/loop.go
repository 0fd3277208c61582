package epochloop

import (
	"context"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer"
)

// Trained is what epoch's collection, training and target sync gave.
type Trained struct {
	Collect    trainer.CollectStats
	Train      trainer.TrainStats
	DurationMS int64 // collect plus train, where the caller measures it
}

// Epoch is one epoch as the loop ran it.
type Epoch struct {
	Epoch int
	Trained
	// ValidSharpe is the Sharpe of the epoch's validation backtest; nil
	// when none was due.
	ValidSharpe *float64
	// Checkpointed says that Steps.Checkpoint ran for the epoch.
	Checkpointed bool
	// Early says that the patience ran out at the epoch: the loop stops.
	Early bool
}

// Steps do the work of an epoch for the loop. An error of any of them
// ends the loop with that error.
type Steps interface {
	// Train runs epoch e's experience collection (env.collect_steps),
	// its steps_per_epoch gradient steps and the target-network sync.
	Train(ctx context.Context, e int) (Trained, error)
	// Backtest runs the greedy policy of epoch e on the validation range
	// and returns the backtest's annualised Sharpe ratio.
	Backtest(ctx context.Context, e int) (float64, error)
	// Checkpoint writes the checkpoint of epoch e, trained t. Due says
	// whether the cadence asked for it (else a new best or an early stop
	// did).
	Checkpoint(ctx context.Context, e int, t Trained, due bool) error
	// Done is told each epoch when its steps are done; it returns true to
	// end the loop after that epoch.
	Done(ctx context.Context, ep Epoch) (stop bool, err error)
}

// Loop runs a run's epochs with config Config, from the scores Scores of
// the epochs before them.
type Loop[Ref any] struct {
	Config config.RunConfig
	// Scores are the run's validation scores: as committed through the
	// epoch before the first, then after each backtest of the loop. The
	// caller sets BestCheckpoint once the best epoch's checkpoint is
	// written.
	Scores Scores[Ref]
	// Early says that the patience ran out at the last epoch run.
	Early bool
	// CheckpointStop checkpoints the epoch the patience runs out at, so
	// that the weights a run stops with are on disk
	// (Scores.MustCheckpoint); without it only the cadence and new bests
	// are checkpointed.
	CheckpointStop bool
}

// Run runs epochs after+1 … until at most with steps: each is trained,
// backtested when Due asks, and checkpointed when Due asks, when its
// backtest is a new best, or when the patience runs out at it (with
// CheckpointStop). The backtest comes before the checkpoint, so that a
// checkpoint's epoch is scored when it is written. The loop ends after
// until, when the patience runs out, or when steps.Done says so. It
// returns the last epoch run (after when none).
func (l *Loop[Ref]) Run(ctx context.Context, after, until int, steps Steps) (int, error) {
	last := after
	for e := after + 1; e <= until; e++ {
		t, err := steps.Train(ctx, e)
		if err != nil {
			return last, err
		}
		ep := Epoch{Epoch: e, Trained: t}
		due, needBt := Due(l.Config, e)
		needCk := due
		if needBt {
			s, err := steps.Backtest(ctx, e)
			if err != nil {
				return last, err
			}
			ep.ValidSharpe = &s
			l.Scores, l.Early = l.Scores.Add(e, s, l.Config.Backtest.Patience)
			needCk = needCk || l.Scores.BestEpoch == e || (l.Early && l.CheckpointStop)
		}
		if needCk {
			if err := steps.Checkpoint(ctx, e, t, due); err != nil {
				return last, err
			}
			ep.Checkpointed = true
		}
		ep.Early, last = l.Early, e
		stop, err := steps.Done(ctx, ep)
		if err != nil {
			return last, err
		}
		if l.Early || stop {
			break
		}
	}
	return last, nil
}
