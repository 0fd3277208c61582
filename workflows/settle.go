package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/trainer"
)

// settle finishes epoch e, trained with train, where the run pauses,
// stops or continues as new and its chunk did not take everything due
// there: a checkpoint if needCk, a validation backtest if needBt, then
// commits the epoch to the run's state and starts retention. A new best validation Sharpe, or the backtest that
// exhausts the patience, is checkpointed even when no checkpoint was due,
// so that the best weights and the weights a run stops with are on disk.
// Nothing is committed unless every step succeeded, so a recovery rolls
// back to a checkpoint whose scores are known. It reports whether the
// patience is exhausted.
func (r *run) settle(e int, train trainer.TrainStats, needCk, needBt bool) (early bool, err error) {
	sc := r.st.Scores
	var ck *activities.CheckpointRef
	startCheckpoint := func() workflow.Future {
		return workflow.ExecuteActivity(r.o.sessionCtx(r.sess.ctx), ta.Checkpoint, activities.CheckpointInput{
			RunID: r.st.RunID, Epoch: e,
			Metrics: map[string]float64{"loss": train.Loss, "grad_norm": train.GradNorm},
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

	r.st.Epoch, r.st.GlobalStep, r.st.Loss = e, train.GlobalStep, train.Loss
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
