package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
)

// trained is what one epoch's training returned.
type trained struct {
	collect activities.CollectOutput
	train   activities.TrainOutput
}

// train runs epoch e's stateful steps on the session's trainer and starts
// recording the epoch's metrics.
func (r *run) train(e int) (trained, error) {
	var t trained
	ctx := r.o.stepCtx(r.sess.ctx)
	r.setPhase("collect")
	if err := workflow.ExecuteActivity(ctx, ta.Collect, activities.CollectInput{RunID: r.st.RunID, Epoch: e}).Get(r.ctx, &t.collect); err != nil {
		return t, err
	}
	r.setPhase("train")
	if err := workflow.ExecuteActivity(ctx, ta.TrainEpoch, activities.TrainInput{RunID: r.st.RunID, Epoch: e}).Get(r.ctx, &t.train); err != nil {
		return t, err
	}
	r.setPhase("sync target")
	if err := workflow.ExecuteActivity(ctx, ta.SyncTarget, activities.SyncInput{RunID: r.st.RunID, Epoch: e}).Get(r.ctx, nil); err != nil {
		return t, err
	}
	r.startControl("record epoch", ca.RecordEpoch, activities.RecordEpochInput{
		RunID: r.st.RunID, Epoch: e, Collect: t.collect.Stats, Train: t.train.Stats,
		DurationMS: t.collect.DurationMS + t.train.DurationMS,
	}, false)
	return t, nil
}

// settle finishes epoch e after its training: a checkpoint if needCk, a
// validation backtest if needBt, then commits the epoch to the run's state
// and starts retention. A new best validation Sharpe, or the backtest that
// exhausts the patience, is checkpointed even when no checkpoint was due,
// so that the best weights and the weights a run stops with are on disk.
// Nothing is committed unless every step succeeded, so a recovery rolls
// back to a checkpoint whose scores are known. It reports whether the
// patience is exhausted.
func (r *run) settle(e int, t trained, needCk, needBt bool) (early bool, err error) {
	sc := r.st.Scores
	var ck *activities.CheckpointRef
	startCheckpoint := func() workflow.Future {
		return workflow.ExecuteActivity(r.o.sessionCtx(r.sess.ctx), ta.Checkpoint, activities.CheckpointInput{
			RunID: r.st.RunID, Epoch: e,
			Metrics: map[string]float64{"loss": t.train.Stats.Loss, "grad_norm": t.train.Stats.GradNorm},
		})
	}
	getCheckpoint := func(f workflow.Future) error {
		var out activities.CheckpointOutput
		err := f.Get(r.ctx, &out)
		if err == nil {
			ck = &out.Checkpoint
		}
		return err
	}
	// The checkpoint and the backtest only read the trainer: both are
	// scheduled at once (the worker runs them one after the other) to save
	// a round trip to the server.
	var ckF, btF workflow.Future
	if needCk {
		ckF = startCheckpoint()
	}
	if needBt {
		btF = workflow.ExecuteActivity(r.o.sessionCtx(r.sess.ctx), ta.Backtest, activities.BacktestInput{RunID: r.st.RunID, Epoch: e})
	}
	switch {
	case needCk && needBt:
		r.setPhase("checkpoint and backtest")
	case needCk:
		r.setPhase("checkpoint")
	case needBt:
		r.setPhase("backtest")
	}
	if ckF != nil {
		if err := getCheckpoint(ckF); err != nil {
			return false, err
		}
	}
	if btF != nil {
		var bt activities.BacktestOutput
		if err := btF.Get(r.ctx, &bt); err != nil {
			return false, err
		}
		sc, early = sc.Add(e, bt.Report.Sharpe, r.cfg.Backtest.Patience)
		if ck == nil && sc.MustCheckpoint(e, early) {
			r.setPhase("checkpoint")
			if err := getCheckpoint(startCheckpoint()); err != nil {
				return false, err
			}
		}
		if sc.BestEpoch == e {
			sc.BestCheckpoint = ck
		}
	}
	if err := r.flush(); err != nil {
		return false, err
	}

	r.st.Epoch, r.st.GlobalStep, r.st.Loss = e, t.train.Stats.GlobalStep, t.train.Stats.Loss
	r.st.Scores = sc
	if ck != nil {
		r.st.LastCheckpoint, r.st.ScoresAtCheckpoint = ck, sc
	}
	if e > r.st.Furthest {
		r.st.Furthest, r.st.Recoveries = e, 0
	}
	r.publishProgress()
	if ck != nil {
		r.retain()
	}
	return early, nil
}

// retain starts retention after a checkpoint; the run's last and best
// checkpoints are kept whatever the ranking says.
func (r *run) retain() {
	keep := []string{r.st.LastCheckpoint.URI}
	if b := r.st.Scores.BestCheckpoint; b != nil {
		keep = append(keep, b.URI)
	}
	r.startControl("retention", ca.ApplyRetention, activities.RetentionInput{
		RunID: r.st.RunID, KeepLast: r.cfg.Checkpoint.KeepLast, KeepBest: r.cfg.Checkpoint.KeepBest, Keep: keep,
	}, true)
}

// controlError marks the failure of a control activity, which has retried
// until the store gave a non-retryable answer: it ends the run, since a new
// session would not change the store's answer.
type controlError struct{ err error }

func (e controlError) Error() string { return e.err.Error() }
func (e controlError) Unwrap() error { return e.err }

// control runs a control activity and waits for it.
func (r *run) control(activity, in, out any) error {
	if err := workflow.ExecuteActivity(r.o.controlCtx(r.ctx), activity, in).Get(r.ctx, out); err != nil {
		return controlError{r.o.controlTimedOut(fmt.Sprint(activity), err)}
	}
	return nil
}

// controlTimedOut turns the failure of a control activity that ran out of
// Options.ControlTimeout into a non-retryable ErrTypeControlTimeout error
// that names it and says what to check; other errors pass unchanged. A
// control activity is retried without an attempt limit, so a failure that
// is neither non-retryable nor a cancellation means the time ran out (the
// server reports retry state TIMEOUT; the SDK's test environment reports
// none).
func (o Options) controlTimedOut(what string, err error) error {
	var (
		ae  *temporal.ActivityError
		app *temporal.ApplicationError
	)
	if !errors.As(err, &ae) || (errors.As(err, &app) && app.NonRetryable()) || temporal.IsCanceledError(err) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s did not succeed within %s (last failure: %v); check that the metadata store "+
			"(PostgreSQL, DATABASE_URL of the control workers) is reachable and that a control worker runs "+
			"(`dqnflow worker --role control`), then start the run again", what, o.ControlTimeout, errors.Unwrap(err)),
		ErrTypeControlTimeout, err)
}

// pendingCall is a control activity started without waiting for it.
type pendingCall struct {
	what string
	f    workflow.Future
	soft bool // its failure is logged, not fatal (retention)
}

// startControl starts a control activity that the run need not wait for;
// flush waits for it. A soft one (retention, which the next checkpoint
// repeats) gets a bounded number of attempts and only logs its failure.
func (r *run) startControl(what string, activity, in any, soft bool) {
	ctx := r.o.controlCtx(r.ctx)
	if soft {
		ctx = workflow.WithRetryPolicy(ctx, temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8,
		})
	}
	r.pending = append(r.pending, pendingCall{what: what, f: workflow.ExecuteActivity(ctx, activity, in), soft: soft})
}

// flush waits for the control activities in flight and returns the first
// hard failure.
func (r *run) flush() error {
	var first error
	for _, p := range r.pending {
		err := p.f.Get(r.ctx, nil)
		switch {
		case err == nil:
		case p.soft:
			workflow.GetLogger(r.ctx).Warn("Control activity failed; it is repeated after the next checkpoint",
				"run", r.st.RunID, "activity", p.what, "error", err)
		case first == nil:
			first = controlError{r.o.controlTimedOut(p.what, err)}
		}
	}
	r.pending = r.pending[:0]
	return first
}
