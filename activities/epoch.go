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
	p, stop := a.beat(ctx, Heartbeat{Epoch: in.Epoch, Stage: "collect"})
	defer stop()
	run, err := a.acquire(ctx, in.RunID)
	if err != nil {
		return CollectOutput{}, err
	}
	defer run.Unlock()
	switch run.step(in.Epoch, StageCollected) {
	case stepDone:
		return CollectOutput{Epoch: in.Epoch, Stats: run.collected, Replayed: true}, nil
	case stepWrong:
		return CollectOutput{}, trainerLost(in.RunID, fmt.Sprintf("asked to collect epoch %d, the trainer here is at %s", in.Epoch, run.where()))
	}
	p.update(func(hb *Heartbeat) { hb.GlobalStep = run.GlobalStep })
	start := time.Now()
	st, err := run.Trainer.Collect(ctx, run.Config.Env.CollectSteps)
	if err != nil {
		a.discard(ctx, run, err)
		return CollectOutput{}, stepFailed(in.RunID, fmt.Sprintf("run %s epoch %d: collect", in.RunID, in.Epoch), err)
	}
	run.Epoch, run.Stage, run.collected = in.Epoch, StageCollected, st
	took := time.Since(start)
	a.observeCollect(run, st, took)
	return CollectOutput{Epoch: in.Epoch, Stats: st, DurationMS: took.Milliseconds()}, nil
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
	p, stop := a.beat(ctx, Heartbeat{Epoch: in.Epoch, Stage: "train"})
	defer stop()
	run, err := a.acquire(ctx, in.RunID)
	if err != nil {
		return TrainOutput{}, err
	}
	defer run.Unlock()
	switch run.step(in.Epoch, StageTrained) {
	case stepDone:
		return TrainOutput{Epoch: in.Epoch, Stats: run.trained, Replayed: true}, nil
	case stepWrong:
		return TrainOutput{}, trainerLost(in.RunID, fmt.Sprintf("asked to train epoch %d, the trainer here is at %s", in.Epoch, run.where()))
	}
	p.update(func(hb *Heartbeat) { hb.Steps, hb.GlobalStep = run.Config.StepsPerEpoch, run.GlobalStep })
	start := time.Now()
	st, err := run.Trainer.Train(ctx, run.Config.StepsPerEpoch, func(pr trainer.Progress) {
		p.update(func(hb *Heartbeat) {
			hb.Step, hb.Steps, hb.GlobalStep, hb.Loss = pr.Step, pr.Steps, pr.GlobalStep, pr.Loss
		})
	})
	if err != nil {
		a.discard(ctx, run, err)
		return TrainOutput{}, stepFailed(in.RunID, fmt.Sprintf("run %s epoch %d: train", in.RunID, in.Epoch), err)
	}
	run.Epoch, run.Stage, run.trained, run.GlobalStep = in.Epoch, StageTrained, st, st.GlobalStep
	took := time.Since(start)
	a.observeTrain(run, st, took)
	return TrainOutput{Epoch: in.Epoch, Stats: st, DurationMS: took.Milliseconds()}, nil
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
	_, stop := a.beat(ctx, Heartbeat{Epoch: in.Epoch, Stage: "sync"})
	defer stop()
	run, err := a.acquire(ctx, in.RunID)
	if err != nil {
		return SyncOutput{}, err
	}
	defer run.Unlock()
	switch run.step(in.Epoch, StageSynced) {
	case stepDone:
		return SyncOutput{Epoch: in.Epoch, GlobalStep: run.GlobalStep, Replayed: true}, nil
	case stepWrong:
		return SyncOutput{}, trainerLost(in.RunID, fmt.Sprintf("asked to sync the target of epoch %d, the trainer here is at %s", in.Epoch, run.where()))
	}
	if err := run.Trainer.SyncTarget(); err != nil {
		a.discard(ctx, run, err)
		return SyncOutput{}, stepFailed(in.RunID, fmt.Sprintf("run %s epoch %d: sync target", in.RunID, in.Epoch), err)
	}
	run.Epoch, run.Stage = in.Epoch, StageSynced
	return SyncOutput{Epoch: in.Epoch, GlobalStep: run.GlobalStep}, nil
}
