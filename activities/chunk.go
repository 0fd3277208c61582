package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/epochloop"
)

// EpochsInput asks RunEpochs for a chunk of run RunID's epochs: After+1,
// After+2, … up to Until at most, for about Budget of wall time.
type EpochsInput struct {
	RunID string `json:"run_id"`
	// After is the last epoch the workflow committed; the trainer here
	// must stand at its end.
	After int `json:"after"`
	// Until is the last epoch the chunk may train: the run's last one, or
	// the last one before the workflow continues as new.
	Until int `json:"until"`
	// Budget is the wall time after which the chunk starts no new epoch;
	// the epoch in progress is finished. Zero or less means one epoch.
	Budget time.Duration `json:"budget"`
	// Scores are the run's validation scores as committed through After;
	// the chunk goes on from them (Scores.Add) to decide which epochs are
	// checkpointed and whether the run stops early.
	Scores Scores `json:"scores"`
}

// EpochResult is one epoch of a chunk, as the workflow commits it.
type EpochResult struct {
	Epoch      int                  `json:"epoch"`
	Collect    trainer.CollectStats `json:"collect"`
	Train      trainer.TrainStats   `json:"train"`
	DurationMS int64                `json:"duration_ms"` // collect plus train
	// ValidSharpe is the Sharpe of the epoch's validation backtest; nil
	// when none was due.
	ValidSharpe *float64 `json:"valid_sharpe,omitempty"`
	// Checkpoint is the checkpoint written at the end of the epoch; nil
	// when none was due.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
}

// EpochsOutput is a chunk's epochs in order, the scores after the last
// one, and whether the patience ran out there (Early).
type EpochsOutput struct {
	Epochs   []EpochResult `json:"epochs"`
	Scores   Scores        `json:"scores"`
	Early    bool          `json:"early,omitempty"`
	Replayed bool          `json:"replayed,omitempty"`
}

// last is the chunk's last epoch.
func (o EpochsOutput) last() int { return o.Epochs[len(o.Epochs)-1].Epoch }

// RunEpochs trains a chunk of epochs in one activity, so that a GPU epoch
// of tens of milliseconds does not wait for a round trip to the Temporal
// server per stage (docs/adr/0010-epochs-in-one-activity.md). The epochs
// run in epochloop's loop, the one "dqnflow train" runs. Each epoch
// runs collect → train → sync target, its epoch row (written in the background while the next
// epoch trains), the validation backtest when due (recorded
// as Backtest records it), the checkpoint when due or when the backtest
// asks for one (Due, Scores.MustCheckpoint; recorded as Checkpoint records
// it). Every row is keyed by run and epoch, so a chunk redone after a
// recovery overwrites its rows. The activity heartbeats the epoch, stage,
// step and loss every HeartbeatInterval and after each epoch.
//
// The chunk ends after epoch in.Until, when the patience runs out, or at
// the first epoch boundary after in.Budget or after a cancellation. It
// never trains an epoch twice: a retry of a
// chunk that completed returns the recorded result, and a failure
// part-way discards the trainer (ErrTypeTrainerLost); the epochs it did
// stay in the store, the workflow restores its last committed checkpoint.
// A stopping worker ends its chunks first (Drain).
func (a *Trainer) RunEpochs(ctx context.Context, in EpochsInput) (_ EpochsOutput, err error) {
	if in.Until <= in.After {
		return EpochsOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run %s: run epochs: until %d is not after epoch %d", in.RunID, in.Until, in.After), ErrTypeInvalidConfig, nil)
	}
	ctx, leave, ok := a.chunks.enter(ctx)
	if !ok {
		return EpochsOutput{}, workerStopping(in.RunID, nil)
	}
	defer func() { // last: after the checkpoint and the rows are recorded
		leave()
		if err != nil && !IsFatal(err) && errors.Is(context.Cause(ctx), ErrWorkerStopping) {
			err = workerStopping(in.RunID, err)
		}
	}()
	answered := func(run *Run) bool {
		c := run.chunk
		return c != nil && c.after == in.After && run.Epoch == c.out.last() && run.Stage == StageSynced
	}
	run, p, replay, release, err := a.hold(ctx, in.RunID, Heartbeat{Epoch: in.After + 1, Stage: "collect"},
		need{epoch: in.After, answered: answered, asked: fmt.Sprintf("asked for the epochs after %d", in.After)})
	if err != nil {
		return EpochsOutput{}, err
	}
	defer release()
	if replay {
		out := run.chunk.out
		out.Replayed = true
		return out, nil
	}
	var out EpochsOutput
	loop := &epochloop.Loop[CheckpointRef]{Config: run.Config, Scores: in.Scores, CheckpointStop: true}
	rows := a.writeRows(ctx, run.ID)
	defer rows.close()
	cks := &checkpointWriter{a: a, ctx: ctx, out: &out, scores: &loop.Scores, p: p}
	defer cks.wait()
	steps := &chunkSteps{a: a, run: run, p: p, rows: rows, cks: cks, out: &out, start: time.Now(), budget: in.Budget}
	if _, err := loop.Run(ctx, in.After, in.Until, steps); err != nil {
		return EpochsOutput{}, err
	}
	if err := cks.wait(); err != nil {
		return EpochsOutput{}, err
	}
	if err := rows.close(); err != nil {
		return EpochsOutput{}, err
	}
	out.Scores, out.Early = loop.Scores, loop.Early
	run.chunk = &chunkResult{after: in.After, out: out}
	return out, nil
}

// rowWriter records a chunk's epoch rows in the background, in order, so
// that the next epoch trains while the store commits the last one's row
// (a transaction of a millisecond or more, against a 47-ms GPU epoch). The
// per-stage path wrote them from a control activity beside the next
// stage, for the same reason. The first failure fails the chunk: at the
// next epoch, or when the chunk ends.
type rowWriter struct {
	rows chan epochRow
	done chan struct{}
	mu   sync.Mutex
	err  error
	once sync.Once
}

type epochRow struct {
	epoch int
	m     metadata.EpochMetrics
}

func (a *Trainer) writeRows(ctx context.Context, runID string) *rowWriter {
	w := &rowWriter{rows: make(chan epochRow, 64), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for r := range w.rows {
			if w.failed() != nil {
				continue
			}
			if err := a.Store.RecordEpoch(ctx, runID, r.epoch, r.m); err != nil {
				w.mu.Lock()
				w.err = classify(fmt.Sprintf("record epoch %d of run %s", r.epoch, runID), err)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// add queues epoch's row and returns the first failure so far.
func (w *rowWriter) add(epoch int, m metadata.EpochMetrics) error {
	if err := w.failed(); err != nil {
		return err
	}
	w.rows <- epochRow{epoch, m}
	return nil
}

func (w *rowWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// close waits for the queued rows and returns the first failure.
func (w *rowWriter) close() error {
	w.once.Do(func() { close(w.rows) })
	<-w.done
	return w.failed()
}

// chunkResult is the last chunk RunEpochs completed on a Run, returned
// again to a retry of the same request.
type chunkResult struct {
	after int
	out   EpochsOutput
}

// chunkSteps are the steps of RunEpochs' epochs (epochloop.Steps) on
// run, which the activity holds locked: the stages of the per-stage
// activities, its epoch row written in the background (rows), the
// checkpoint written in the background (cks), the heartbeat after each
// epoch; the chunk ends at the first epoch boundary after budget or a
// cancellation.
type chunkSteps struct {
	a      *Trainer
	run    *Run
	p      *progress
	rows   *rowWriter
	cks    *checkpointWriter
	out    *EpochsOutput
	start  time.Time
	budget time.Duration
}

// stage heartbeats that epoch e entered stage name.
func (s *chunkSteps) stage(e int, name string) {
	s.p.update(func(hb *Heartbeat) {
		hb.Epoch, hb.Stage, hb.Step, hb.Steps, hb.GlobalStep = e, name, 0, 0, s.run.GlobalStep
	})
}

func (s *chunkSteps) Train(ctx context.Context, e int) (epochloop.Trained, error) {
	s.stage(e, "collect")
	col, colTook, err := s.a.collect(ctx, s.run, e)
	if err != nil {
		return epochloop.Trained{}, err
	}
	s.stage(e, "train")
	tr, trTook, err := s.a.train(ctx, s.run, e, s.p)
	if err != nil {
		return epochloop.Trained{}, err
	}
	s.stage(e, "sync")
	if err := s.a.sync(ctx, s.run, e); err != nil {
		return epochloop.Trained{}, err
	}
	t := epochloop.Trained{Collect: col, Train: tr, DurationMS: colTook.Milliseconds() + trTook.Milliseconds()}
	return t, s.rows.add(e, epochMetrics(t.Collect, t.Train, t.DurationMS))
}

func (s *chunkSteps) Backtest(ctx context.Context, e int) (float64, error) {
	s.stage(e, "backtest")
	bt, err := s.a.backtest(ctx, s.run, BacktestInput{RunID: s.run.ID, Epoch: e})
	if err != nil {
		return 0, err
	}
	return bt.Report.Sharpe, nil
}

// Checkpoint takes epoch e's snapshot and writes it in the background.
// One checkpoint is in flight at a time: the last one's memory and disk
// bandwidth are spent before the next snapshot is taken.
func (s *chunkSteps) Checkpoint(ctx context.Context, e int, t epochloop.Trained, _ bool) error {
	s.stage(e, "checkpoint")
	if err := s.cks.wait(); err != nil {
		return err
	}
	ck, err := s.a.snapshot(s.run, CheckpointInput{
		RunID: s.run.ID, Epoch: e,
		Metrics: map[string]float64{"loss": t.Train.Loss, "grad_norm": t.Train.GradNorm},
	})
	if err != nil {
		return err
	}
	s.cks.start(ck)
	return nil
}

func (s *chunkSteps) Done(ctx context.Context, ep epochloop.Epoch) (bool, error) {
	s.out.Epochs = append(s.out.Epochs, EpochResult{
		Epoch: ep.Epoch, Collect: ep.Collect, Train: ep.Train, DurationMS: ep.DurationMS, ValidSharpe: ep.ValidSharpe,
	})
	s.p.update(func(hb *Heartbeat) { hb.Done, hb.ValidSharpe = ep.Epoch, ep.ValidSharpe })
	if err := s.cks.poll(); err != nil {
		return false, err
	}
	activity.RecordHeartbeat(ctx, s.p.get())
	return time.Since(s.start) >= s.budget || ctx.Err() != nil, nil
}

// checkpointWriter writes a chunk's checkpoints in the background, one at
// a time, while the next epochs train. The snapshot is taken on the
// activity's goroutine at the end of its epoch (the trainer's state is
// copied to the host, so the blob is that epoch's, bit for bit); encoding,
// hashing, the fsync and the row run beside the next epoch. On a GPU they
// cost about as much as a whole epoch (docs/perf/gpu-2026-12-04.md), and
// the default config checkpoints every epoch.
//
// A checkpoint's row is recorded only once its blob is whole, as before,
// so ChunkLeftovers and the recovery see only finished checkpoints. The
// epoch's result and the scores get the ref when the write is done: at
// the next epoch boundary it has finished by, before the next snapshot,
// or when the chunk ends, which waits for it (ADR 0010, amended). A write
// that fails fails the chunk at that point, and the run recovers from its
// newest recorded checkpoint.
type checkpointWriter struct {
	a      *Trainer
	ctx    context.Context
	out    *EpochsOutput
	scores *Scores // the chunk's scores as they stand
	p      *progress

	done chan struct{} // closed when the write in flight ends; nil when none is
	ref  CheckpointRef // its result, once done is closed
	err  error
}

// start writes ck in the background; the caller has waited for the last
// one. A checkpoint whose state was taken is written and recorded even if
// the chunk is cancelled meanwhile (the run stopped, the worker shutting
// down): the write takes tens of milliseconds, and the chunk waits for it
// before it returns, so a cancellation never leaves a blob without its row.
func (w *checkpointWriter) start(ck snapshotted) {
	done := make(chan struct{})
	w.done = done
	ctx := context.WithoutCancel(w.ctx)
	go func() {
		defer close(done)
		w.ref, w.err = w.a.write(ctx, ck)
	}()
}

// poll hands on the write in flight if it has finished, without waiting.
func (w *checkpointWriter) poll() error {
	if w.done == nil {
		return nil
	}
	select {
	case <-w.done:
		return w.finish()
	default:
		return nil
	}
}

// wait waits for the write in flight, if any, and hands it on.
func (w *checkpointWriter) wait() error {
	if w.done == nil {
		return nil
	}
	<-w.done
	return w.finish()
}

// finish gives the finished write's ref to its epoch's result, to the
// scores when that epoch is still the best, and to the heartbeat.
func (w *checkpointWriter) finish() error {
	w.done = nil
	if w.err != nil {
		return w.err
	}
	ref := w.ref
	e := ref.Epoch
	for i := range w.out.Epochs {
		if w.out.Epochs[i].Epoch == e {
			w.out.Epochs[i].Checkpoint = &ref
		}
	}
	if w.scores.BestEpoch == e {
		w.scores.BestCheckpoint = &ref
	}
	w.p.update(func(hb *Heartbeat) { hb.Checkpoint = &ref })
	return nil
}
