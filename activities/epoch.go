package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/dqnflow/dqnflow/trainer"
)

// CollectInput asks for epoch Epoch's experience collection:
// env.collect_steps steps in each parallel environment.
type CollectInput struct {
	RunID string `json:"run_id"`
	Epoch int    `json:"epoch"`
}

// CollectOutput is the collection's summary. Replayed means the collection
// had already run and its recorded result is returned again.
type CollectOutput struct {
	Epoch      int                  `json:"epoch"`
	Stats      trainer.CollectStats `json:"stats"`
	DurationMS int64                `json:"duration_ms"`
	Replayed   bool                 `json:"replayed,omitempty"`
}

// Collect runs epoch in.Epoch's experience collection.
func (a *Trainer) Collect(ctx context.Context, in CollectInput) (CollectOutput, error) {
	run, p, replay, release, err := a.hold(ctx, in.RunID, Heartbeat{Epoch: in.Epoch, Stage: "collect"},
		need{epoch: in.Epoch, stage: StageCollected, asked: fmt.Sprintf("asked to collect epoch %d", in.Epoch)})
	if err != nil {
		return CollectOutput{}, err
	}
	defer release()
	if replay {
		return CollectOutput{Epoch: in.Epoch, Stats: run.collected, Replayed: true}, nil
	}
	p.update(func(hb *Heartbeat) { hb.GlobalStep = run.GlobalStep })
	return a.collect(ctx, run, in.Epoch)
}

// collect runs epoch e's collection on run, which the caller holds locked
// at the end of epoch e−1. A failure discards the trainer.
func (a *Trainer) collect(ctx context.Context, run *Run, e int) (CollectOutput, error) {
	start := time.Now()
	st, err := run.Trainer.Collect(ctx, run.Config.Env.CollectSteps)
	if err != nil {
		a.discard(ctx, run, err)
		return CollectOutput{}, stepFailed(run.ID, fmt.Sprintf("run %s epoch %d: collect", run.ID, e), err)
	}
	run.Epoch, run.Stage, run.collected = e, StageCollected, st
	took := time.Since(start)
	a.observeCollect(run, st, took)
	return CollectOutput{Epoch: e, Stats: st, DurationMS: took.Milliseconds()}, nil
}

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

// TrainInput asks for epoch Epoch's training: steps_per_epoch gradient steps.
type TrainInput struct {
	RunID string `json:"run_id"`
	Epoch int    `json:"epoch"`
}

// TrainOutput is the training's summary. Replayed means the training had
// already run and its recorded result is returned again.
type TrainOutput struct {
	Epoch      int                `json:"epoch"`
	Stats      trainer.TrainStats `json:"stats"`
	DurationMS int64              `json:"duration_ms"`
	Replayed   bool               `json:"replayed,omitempty"`
}

// TrainEpoch runs epoch in.Epoch's gradient steps, heartbeating the latest
// step and loss every HeartbeatInterval. It never trains an epoch twice: a
// retry after it completed returns the recorded result, and a failure
// part-way discards the trainer (ErrTypeTrainerLost), so the workflow
// restores the last checkpoint instead of training on a half-updated state.
func (a *Trainer) TrainEpoch(ctx context.Context, in TrainInput) (TrainOutput, error) {
	run, p, replay, release, err := a.hold(ctx, in.RunID, Heartbeat{Epoch: in.Epoch, Stage: "train"},
		need{epoch: in.Epoch, stage: StageTrained, asked: fmt.Sprintf("asked to train epoch %d", in.Epoch)})
	if err != nil {
		return TrainOutput{}, err
	}
	defer release()
	if replay {
		return TrainOutput{Epoch: in.Epoch, Stats: run.trained, Replayed: true}, nil
	}
	p.update(func(hb *Heartbeat) { hb.Steps, hb.GlobalStep = run.Config.StepsPerEpoch, run.GlobalStep })
	return a.train(ctx, run, in.Epoch, p)
}

// train runs epoch e's gradient steps on run, which the caller holds
// locked after epoch e's collection, reporting each step's progress to p.
// A failure discards the trainer.
func (a *Trainer) train(ctx context.Context, run *Run, e int, p *progress) (TrainOutput, error) {
	start := time.Now()
	st, err := run.Trainer.Train(ctx, run.Config.StepsPerEpoch, func(pr trainer.Progress) {
		p.update(func(hb *Heartbeat) {
			hb.Step, hb.Steps, hb.GlobalStep, hb.Loss = pr.Step, pr.Steps, pr.GlobalStep, pr.Loss
		})
	})
	if err != nil {
		a.discard(ctx, run, err)
		return TrainOutput{}, stepFailed(run.ID, fmt.Sprintf("run %s epoch %d: train", run.ID, e), err)
	}
	run.Epoch, run.Stage, run.trained, run.GlobalStep = e, StageTrained, st, st.GlobalStep
	took := time.Since(start)
	a.observeTrain(run, st, took)
	return TrainOutput{Epoch: e, Stats: st, DurationMS: took.Milliseconds()}, nil
}

// SyncInput asks for epoch Epoch's target-network update.
type SyncInput struct {
	RunID string `json:"run_id"`
	Epoch int    `json:"epoch"`
}

// SyncOutput reports the run's position after the update, which completes
// the epoch.
type SyncOutput struct {
	Epoch      int   `json:"epoch"`
	GlobalStep int64 `json:"global_step"`
	Replayed   bool  `json:"replayed,omitempty"`
}

// SyncTarget moves the target network towards the online network, once per
// epoch: target ← τ·online + (1−τ)·target.
func (a *Trainer) SyncTarget(ctx context.Context, in SyncInput) (SyncOutput, error) {
	run, _, replay, release, err := a.hold(ctx, in.RunID, Heartbeat{Epoch: in.Epoch, Stage: "sync"},
		need{epoch: in.Epoch, stage: StageSynced, asked: fmt.Sprintf("asked to sync the target of epoch %d", in.Epoch)})
	if err != nil {
		return SyncOutput{}, err
	}
	defer release()
	if replay {
		return SyncOutput{Epoch: in.Epoch, GlobalStep: run.GlobalStep, Replayed: true}, nil
	}
	if err := a.sync(ctx, run, in.Epoch); err != nil {
		return SyncOutput{}, err
	}
	return SyncOutput{Epoch: in.Epoch, GlobalStep: run.GlobalStep}, nil
}

// sync updates run's target network, completing epoch e; the caller holds
// run locked after epoch e's training. A failure discards the trainer.
func (a *Trainer) sync(ctx context.Context, run *Run, e int) error {
	if err := run.Trainer.SyncTarget(); err != nil {
		a.discard(ctx, run, err)
		return stepFailed(run.ID, fmt.Sprintf("run %s epoch %d: sync target", run.ID, e), err)
	}
	run.Epoch, run.Stage = e, StageSynced
	return nil
}
