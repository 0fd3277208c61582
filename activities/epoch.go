package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/dqnflow/dqnflow/trainer"
)

// Heartbeat is the progress a session activity reports while it works; the
// CLI shows it from the pending activity's heartbeat details.
type Heartbeat struct {
	Epoch      int     `json:"epoch"`
	Stage      string  `json:"stage"` // open, collect, train, sync, checkpoint, backtest or evaluate
	Step       int     `json:"step,omitempty"`
	Steps      int     `json:"steps,omitempty"`
	GlobalStep int64   `json:"global_step"`
	Loss       float64 `json:"loss,omitempty"`
	// Done is the last epoch RunEpochs completed in its chunk (0 before
	// the first), with its validation Sharpe when it was backtested and
	// the newest checkpoint the chunk wrote.
	Done        int            `json:"done,omitempty"`
	ValidSharpe *float64       `json:"valid_sharpe,omitempty"`
	Checkpoint  *CheckpointRef `json:"checkpoint,omitempty"`
}

// The steps of one epoch of a RunEpochs chunk: collect, train, sync. Each
// runs on run, which the caller holds locked where the step before left
// it, and a failure discards the trainer, so that the workflow restores
// the last checkpoint instead of training on a half-updated state. (The
// per-stage activities that once ran them one by one went with issue 46,
// ADR 0046.)

// collect runs epoch e's collection on run, held at the end of epoch e−1.
func (a *Trainer) collect(ctx context.Context, run *Run, e int) (trainer.CollectStats, time.Duration, error) {
	start := time.Now()
	st, err := run.Trainer.Collect(ctx, run.Config.Env.CollectSteps)
	if err != nil {
		a.discard(ctx, run, err)
		return trainer.CollectStats{}, 0, stepFailed(run.ID, fmt.Sprintf("run %s epoch %d: collect", run.ID, e), err)
	}
	run.Epoch, run.Stage = e, StageCollected
	took := time.Since(start)
	a.observeCollect(run, st, took)
	return st, took, nil
}

// train runs epoch e's gradient steps on run, held after epoch e's
// collection, reporting each step's progress to p.
func (a *Trainer) train(ctx context.Context, run *Run, e int, p *progress) (trainer.TrainStats, time.Duration, error) {
	start := time.Now()
	st, err := run.Trainer.Train(ctx, run.Config.StepsPerEpoch, func(pr trainer.Progress) {
		p.update(func(hb *Heartbeat) {
			hb.Step, hb.Steps, hb.GlobalStep, hb.Loss = pr.Step, pr.Steps, pr.GlobalStep, pr.Loss
		})
	})
	if err != nil {
		a.discard(ctx, run, err)
		return trainer.TrainStats{}, 0, stepFailed(run.ID, fmt.Sprintf("run %s epoch %d: train", run.ID, e), err)
	}
	run.Epoch, run.Stage, run.GlobalStep = e, StageTrained, st.GlobalStep
	took := time.Since(start)
	a.observeTrain(run, st, took)
	return st, took, nil
}

// sync moves run's target network towards the online network (target ←
// τ·online + (1−τ)·target), completing epoch e; run is held after epoch
// e's training.
func (a *Trainer) sync(ctx context.Context, run *Run, e int) error {
	if err := run.Trainer.SyncTarget(); err != nil {
		a.discard(ctx, run, err)
		return stepFailed(run.ID, fmt.Sprintf("run %s epoch %d: sync target", run.ID, e), err)
	}
	run.Epoch, run.Stage = e, StageSynced
	return nil
}
