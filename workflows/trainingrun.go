package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
)

// Workflows holds dqnflow's workflows. Register its methods on a worker
// that serves ControlTaskQueue (worker.New does); every such worker must use
// the same Options.
type Workflows struct {
	Options Options
}

// Activity receivers for method references: workflow.ExecuteActivity(ctx,
// ta.TrainEpoch, in) schedules the activity named "TrainEpoch".
var (
	ta *activities.Trainer
	ca *activities.Control
)

// ErrTypeTooManyRecoveries is the application error type of a run that kept
// losing its trainer without making progress (Options.MaxRecoveries).
const ErrTypeTooManyRecoveries = "TooManyRecoveries"

// TrainingRun trains one model for cfg.Epochs epochs. The UI and the CLI
// pass only cfg (JSON onto the defaults: {} trains the default model, and
// no input at all does the same); state is nil then, and carries the run
// across a Continue-As-New, or the lineage and warm start that Retrain and
// Sweep give their child runs.
//
// An invalid cfg fails the run at once with a non-retryable
// activities.ErrTypeInvalidConfig error that names the field, before any
// activity runs. Then the run is recorded, a session on a GPU worker opens
// the trainer, and each epoch runs collect → train → sync target, with a
// checkpoint every checkpoint.every epochs and a validation backtest every
// backtest.every epochs (a new best validation Sharpe is always
// checkpointed), followed by retention. The epochs run in chunks of about
// Options.ChunkBudget, one RunEpochs activity each (ADR 0010). See ADR
// 0001 for how a lost worker is recovered and why the run stays on one
// worker.
func (w *Workflows) TrainingRun(ctx workflow.Context, cfg config.RunConfig, state *RunState) (*RunResult, error) {
	if cfg == (config.RunConfig{}) {
		cfg = config.Defaults()
	}
	if err := cfg.Validate(); err != nil {
		return nil, invalidConfig("run config", err)
	}
	r := newRun(ctx, w.Options.WithDefaults(), cfg, state)
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) { return r.progress(), nil }); err != nil {
		return nil, err
	}
	return r.loop()
}

// invalidConfig is the non-retryable error for a config that fails
// validation; its details hold the field, the value and the allowed range.
func invalidConfig(what string, err error) error {
	var details []any
	var fe *config.FieldError
	if errors.As(err, &fe) {
		details = append(details, map[string]string{"field": fe.Field, "value": fmt.Sprint(fe.Value), "allowed": fe.Allowed})
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s: %v; fix it and start again", what, err), activities.ErrTypeInvalidConfig, nil, details...)
}

// run is one TrainingRun workflow run.
type run struct {
	ctx     workflow.Context
	o       Options
	cfg     config.RunConfig
	st      RunState
	sess    *session // open session; nil when none
	phase   string
	started int // st.Epoch when this workflow run began

	published time.Time // workflow time of the last search attribute upsert

	sig             signals
	resumeRequested bool
	pending         []pendingCall // control activities in flight
}

func newRun(ctx workflow.Context, o Options, cfg config.RunConfig, state *RunState) *run {
	r := &run{ctx: ctx, o: o, cfg: cfg, phase: "starting"}
	if state != nil {
		r.st = *state
	}
	if info := workflow.GetInfo(ctx); !r.st.Recorded {
		// The first execution of the run (a run is recorded before it
		// continues as new); the SDK's test environment leaves FirstRunID
		// empty.
		r.st.RunID, r.st.ExecutionID = info.WorkflowExecution.ID, info.FirstRunID
		if r.st.ExecutionID == "" {
			r.st.ExecutionID = info.WorkflowExecution.RunID
		}
	} else if r.st.RunID == "" {
		r.st.RunID = info.WorkflowExecution.ID
	}
	r.started = r.st.Epoch
	r.listen()
	return r
}

// listen prepares the run's signals. A run records them in its state
// (PauseRequested, StopRequested, resumeRequested) and acts on them at
// epoch boundaries. Of a pause and a resume, the later wins: a resume that
// arrives before a pause took effect (even while the pause's checkpoint or
// backtest runs) cancels it, and a pause forgets an earlier resume; within
// one workflow task, pauses are taken before resumes.
//
// Runs take the signals from their channels (takeSignals) at every point
// where they decide on them and right before a Continue-As-New, so that
// none is left behind (a goroutine that received them would run after the
// main coroutine in a workflow task, and lose a signal that arrived in the
// task that continued the run as new).
func (r *run) listen() {
	r.sig = signals{
		pause:  workflow.GetSignalChannel(r.ctx, PauseSignal),
		resume: workflow.GetSignalChannel(r.ctx, ResumeSignal),
		stop:   workflow.GetSignalChannel(r.ctx, StopSignal),
	}
}

// signals are TrainingRun's signal channels.
type signals struct {
	pause, resume, stop workflow.ReceiveChannel
}

// takeSignals records every signal received so far (see listen).
func (r *run) takeSignals() {
	for r.sig.pause.ReceiveAsync(nil) {
		r.st.PauseRequested, r.resumeRequested = true, false
	}
	for r.sig.resume.ReceiveAsync(nil) {
		r.st.PauseRequested, r.resumeRequested = false, true
	}
	for r.sig.stop.ReceiveAsync(nil) {
		r.st.StopRequested = true
	}
}

// loop drives the run to its end, a Continue-As-New or a failure.
func (r *run) loop() (*RunResult, error) {
	if !r.st.Recorded {
		r.setPhase("recording the run")
		var out activities.RecordRunOutput
		if err := r.control(ca.RecordRun, activities.RecordRunInput{
			RunID: r.st.RunID, ExecutionID: r.st.ExecutionID, Lineage: r.st.Lineage, ParentRunID: r.st.ParentRunID, Config: r.cfg,
		}, &out); err != nil {
			return nil, r.fail(err)
		}
		r.st.Recorded, r.st.Lineage = true, out.Lineage
		if out.RunID != "" {
			r.st.RunID = out.RunID
		}
	}
	r.st.Status = metadata.StatusRunning
	r.publish()
	for {
		if r.sess == nil {
			if err := r.open(); err != nil {
				if errors.Is(err, errStopped) {
					return r.finish(metadata.StatusStopped)
				}
				if err := r.recover(err); err != nil {
					return nil, err
				}
				continue
			}
		}
		if r.st.Epoch >= r.cfg.Epochs {
			return r.finish(metadata.StatusCompleted)
		}
		o, err := r.epochs()
		if err != nil {
			if err := r.recover(err); err != nil {
				return nil, err
			}
			continue
		}
		switch {
		case o.final:
			return r.finish(metadata.StatusCompleted)
		case o.stopping:
			return r.finish(metadata.StatusStopped)
		case o.early:
			return r.finish(metadata.StatusEarlyStopped)
		case o.pausing:
			if err := r.pause(); err != nil {
				if errors.Is(err, errStopped) {
					return r.finish(metadata.StatusStopped)
				}
				return nil, r.fail(err)
			}
		case o.moveOn:
			return nil, r.continueAsNew()
		}
	}
}

// outcome is where the run stands after an epoch or a chunk of epochs has
// been committed: what it does next.
type outcome struct {
	final    bool // the run's last epoch is done
	stopping bool // a stop signal was taken
	early    bool // the patience ran out
	pausing  bool // a pause signal was taken
	moveOn   bool // the run continues as new
}

// errStopped reports a stop signal taken while the run held no trainer.
var errStopped = errors.New("stop requested")

// open gets a session on a GPU worker and the run's trainer in it.
func (r *run) open() error {
	r.setPhase("waiting for a GPU worker")
	stopped := func() bool {
		r.takeSignals()
		return r.st.StopRequested
	}
	sess, err := r.o.acquireSessionUnless(r.ctx, r.st.SessionToken, r.st.RunID, stopped)
	if err != nil {
		if errors.Is(err, errStopped) {
			return err
		}
		return controlError{err} // nothing a new session would fix
	}
	r.sess, r.st.SessionToken = sess, sess.token
	r.setPhase("opening the trainer")
	var out activities.OpenOutput
	if err := workflow.ExecuteActivity(r.o.sessionCtx(sess.ctx), ta.OpenTrainer, activities.OpenInput{
		RunID: r.st.RunID, ExecutionID: r.st.ExecutionID, Config: r.cfg, Epoch: r.st.Epoch, GlobalStep: r.st.GlobalStep,
		Resume: r.st.LastCheckpoint, Warm: r.st.Warm,
	}).Get(r.ctx, &out); err != nil {
		return err
	}
	if out.Epoch != r.st.Epoch {
		workflow.GetLogger(r.ctx).Warn("The trainer opened at another epoch than the run's; continuing from it",
			"run", r.st.RunID, "run_epoch", r.st.Epoch, "trainer_epoch", out.Epoch)
		r.st.Epoch, r.st.GlobalStep, r.st.Scores = out.Epoch, out.GlobalStep, r.st.ScoresAtCheckpoint
	}
	if out.Fallback != nil {
		// The last checkpoint is damaged (activities.OpenOutput.Damaged);
		// the worker restored the previous good one, which is now the
		// run's last: a later recovery starts from it too.
		workflow.GetLogger(r.ctx).Warn("The run's last checkpoint is damaged; going on from the previous good one",
			"run", r.st.RunID, "damaged", out.Damaged, "restored", out.Fallback.URI, "epoch", out.Fallback.Epoch)
		r.st.LastCheckpoint = out.Fallback
	}
	if out.NotBitExact != "" && out.Restored {
		workflow.GetLogger(r.ctx).Warn("The run is no longer bit-exact", "run", r.st.RunID, "why", out.NotBitExact)
	}
	if out.Info != r.st.Info {
		r.st.Info = out.Info
		r.startControl("set device", ca.SetRunDevice, activities.SetDeviceInput{RunID: r.st.RunID, Info: out.Info}, false)
	}
	return nil
}

// recover handles a failure of the trainer or its worker: a deterministic
// failure ends the run; anything else (worker lost, session failed,
// heartbeat timeout, a step that failed part-way) drops the session and
// rolls the run back to its last checkpoint, to be reopened on any worker,
// at most MaxRecoveries times without progress. It returns the run's final
// error, or nil to go on.
func (r *run) recover(cause error) error {
	var ce controlError
	if r.ctx.Err() != nil || activities.IsFatal(cause) || errors.As(cause, &ce) {
		return r.fail(cause)
	}
	r.st.Recoveries++
	if r.st.Recoveries > r.o.MaxRecoveries {
		return r.fail(temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run %s lost its trainer %d times without getting past epoch %d (last error: %v); "+
				"see the GPU workers' logs; a deterministic crash needs a fix before the run is started again",
				r.st.RunID, r.st.Recoveries, r.st.Furthest, cause),
			ErrTypeTooManyRecoveries, cause))
	}
	workflow.GetLogger(r.ctx).Warn("Run lost its trainer; reopening from the last checkpoint on any GPU worker",
		"run", r.st.RunID, "recovery", r.st.Recoveries, "error", cause)
	if r.sess != nil {
		// A stopping worker's session ends with it (changeStoppedSessionLeft).
		var ae *temporal.ApplicationError
		if errors.As(cause, &ae) && ae.Type() == activities.ErrTypeWorkerStopping &&
			version(r.ctx, changeStoppedSessionLeft) != workflow.DefaultVersion {
			r.sess.abandon()
		} else {
			r.sess.release()
		}
		r.sess = nil
	}
	r.st.SessionToken = nil
	r.st.Epoch, r.st.GlobalStep, r.st.Loss = 0, 0, 0
	if ck := r.st.LastCheckpoint; ck != nil {
		r.st.Epoch, r.st.GlobalStep = ck.Epoch, ck.GlobalStep
	}
	r.st.Scores = r.st.ScoresAtCheckpoint
	r.setPhase("recovering")
	return nil
}

// pause frees the GPU slot and the trainer after the epoch was checkpointed
// and backtested, and waits for a resume (nil) or a stop (errStopped). A
// resume that arrived while the epoch was being checkpointed and
// backtested cancels the pause: the run goes on with its trainer.
func (r *run) pause() error {
	if err := r.flush(); err != nil {
		return err
	}
	r.takeSignals()
	if r.resumeRequested {
		r.resumeRequested = false
		return nil
	}
	token := r.st.SessionToken
	r.closeTrainer()
	r.st.SessionToken = token // try the same worker first on resume
	if err := r.setStatus(metadata.StatusPaused, ""); err != nil {
		return err
	}
	r.setPhase("paused")
	if err := workflow.Await(r.ctx, func() bool {
		r.takeSignals()
		return r.resumeRequested || r.st.StopRequested
	}); err != nil {
		return err
	}
	if r.st.StopRequested {
		return errStopped
	}
	r.resumeRequested = false
	return r.setStatus(metadata.StatusRunning, "")
}

// continueAsNew hands the run to a new workflow run right after a
// checkpoint. The worker is asked to hold the run's slot for the new run,
// then the session is completed; the trainer stays in the worker's
// registry, and the recreate token sends the new run back to that worker,
// which admits its session to the held slot and reuses the trainer. Without the hold, a run queued for a slot took it
// the moment the session completed (ADR 0001).
func (r *run) continueAsNew() error {
	if err := r.flush(); err != nil {
		return r.fail(err)
	}
	if r.sess != nil {
		if r.sess.open() {
			err := workflow.ExecuteActivity(r.o.closeCtx(r.sess.ctx), ta.HoldSlot, activities.HoldInput{
				RunID: r.st.RunID, For: r.o.RecreateTimeout + r.o.SessionHeartbeatTimeout,
			}).Get(r.ctx, nil)
			if err != nil {
				workflow.GetLogger(r.ctx).Warn("The worker did not hold the slot for the next run; it may go to a queued run",
					"run", r.st.RunID, "error", err)
			}
		}
		r.sess.release()
		r.sess = nil
	}
	r.takeSignals() // a pause or stop received up to now goes with the run
	next := r.st
	return workflow.NewContinueAsNewError(r.ctx, TrainingRunName, r.cfg, &next)
}

func (r *run) wantContinueAsNew(e int) bool {
	info := workflow.GetInfo(r.ctx)
	return info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() >= r.o.HistoryLimit ||
		(r.o.ContinueAsNewEvery > 0 && e-r.started >= r.o.ContinueAsNewEvery)
}

// finish ends the run with status: trainer closed, session completed,
// status recorded.
func (r *run) finish(status metadata.Status) (*RunResult, error) {
	if err := r.flush(); err != nil {
		return nil, r.fail(err)
	}
	r.closeTrainer()
	rec := r.recommend()
	if err := r.setStatus(status, ""); err != nil {
		return nil, r.fail(err)
	}
	r.setPhase("done")
	return &RunResult{
		RunID: r.st.RunID, Lineage: r.st.Lineage, Status: status,
		Epochs: r.st.Epoch, GlobalStep: r.st.GlobalStep,
		BestEpoch: r.st.Scores.BestEpoch, BestValidSharpe: r.st.Scores.BestValidSharpe,
		BestCheckpoint: r.st.Scores.BestCheckpoint, LastCheckpoint: r.st.LastCheckpoint,
		Recommendation: rec,
		Info:           r.st.Info, Recoveries: r.st.Recoveries,
	}, nil
}

// recommend records in the run's best checkpoint what the run
// recommends doing with it (activities.Control.RecordRecommendation, the
// metadata "dqnflow train" writes; changeRunRecommendation) and points
// the run's refs at the rewritten blob. A failure leaves the checkpoint
// without a recommendation and the run as it ended: the weights are
// whole, and evaluate, backtest and report then say nothing of one.
func (r *run) recommend() *checkpoint.Recommendation {
	best := r.st.Scores.BestCheckpoint
	if best == nil || version(r.ctx, changeRunRecommendation) == workflow.DefaultVersion {
		return nil
	}
	r.setPhase("recommendation")
	var out activities.RecommendOutput
	if err := workflow.ExecuteActivity(r.o.controlCtx(r.ctx), ca.RecordRecommendation,
		activities.RecommendInput{Checkpoint: *best, MinValidT: r.cfg.Backtest.MinValidT}).Get(r.ctx, &out); err != nil {
		workflow.GetLogger(r.ctx).Warn("Recording the run's recommendation in its best checkpoint failed; the checkpoint has none",
			"run", r.st.RunID, "checkpoint", best.URI, "error", err)
		return nil
	}
	ck := out.Checkpoint
	r.st.Scores.BestCheckpoint = &ck
	if l := r.st.LastCheckpoint; l != nil && l.URI == ck.URI {
		r.st.LastCheckpoint = &ck
	}
	return &out.Recommendation
}

// fail records the run as failed (or canceled) and returns cause, the
// workflow's error. Clean-up is best effort and survives cancellation.
func (r *run) fail(cause error) error {
	status := metadata.StatusFailed
	if r.ctx.Err() != nil {
		status = metadata.StatusCanceled
		r.ctx, _ = workflow.NewDisconnectedContext(r.ctx)
	}
	var ce controlError
	if errors.As(cause, &ce) {
		cause = ce.err
	}
	_ = r.flush()
	r.closeTrainer()
	r.setPhase(string(status))
	errText := cause.Error()
	var ae *temporal.ApplicationError
	if ck := r.st.LastCheckpoint; ck != nil && errors.As(cause, &ae) && ae.Type() == activities.ErrTypeNonFinite {
		// Nothing after the last checkpoint is kept, so say which one is
		// good: the run can be resumed or warm-started from it.
		errText += fmt.Sprintf("; the last good checkpoint is epoch %d (global step %d): %s, sha256 %s",
			ck.Epoch, ck.GlobalStep, ck.URI, ck.SHA256)
	}
	if r.st.Recorded {
		if err := r.setStatus(status, errText); err != nil {
			workflow.GetLogger(r.ctx).Error("Recording the run's failure failed", "run", r.st.RunID, "error", err)
		}
	}
	return cause
}

// host is the host name of the session's worker; empty without a session.
func (r *run) host() string {
	if r.sess == nil {
		return ""
	}
	return r.sess.host
}

// closeTrainer frees the trainer (best effort) and completes the session.
func (r *run) closeTrainer() {
	if r.sess == nil {
		return
	}
	if r.sess.open() {
		err := workflow.ExecuteActivity(r.o.closeCtx(r.sess.owner), ta.CloseTrainer, activities.CloseInput{RunID: r.st.RunID}).Get(r.ctx, nil)
		if err != nil {
			workflow.GetLogger(r.ctx).Warn("Closing the trainer failed; the worker evicts it when idle", "run", r.st.RunID, "error", err)
		}
	}
	r.sess.release()
	r.sess = nil
}

// setStatus records status in the store and the search attributes. The
// error text is cleaned here (errtext.Clean, a pure function) so that the
// activity's input in the history is bounded and its JSON loses no byte;
// the store cleans it again for its other callers.
func (r *run) setStatus(status metadata.Status, errText string) error {
	r.st.Status = status
	r.publish()
	return r.control(ca.SetRunStatus, activities.SetStatusInput{RunID: r.st.RunID, Status: status, Error: errtext.Clean(errText)}, nil)
}

func (r *run) progress() Progress {
	return Progress{
		RunID: r.st.RunID, Lineage: r.st.Lineage, Status: r.st.Status, Phase: r.phase,
		Epoch: r.st.Epoch, Epochs: r.cfg.Epochs, Step: r.st.GlobalStep, Loss: r.st.Loss,
		BestEpoch: r.st.Scores.BestEpoch, BestValidSharpe: r.st.Scores.BestValidSharpe,
		LastValidSharpe: r.st.Scores.LastValidSharpe, LastCheckpoint: r.st.LastCheckpoint,
		Backend: r.st.Info.Backend, Device: r.st.Info.Device, Precision: r.st.Info.Precision,
		Host: r.host(), Recoveries: r.st.Recoveries,
	}
}
