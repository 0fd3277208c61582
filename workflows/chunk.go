package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
)

// MaxChunkEpochs bounds the epochs of one chunk whatever its budget: a
// chunk's result holds about 1 kB per epoch (measured,
// docs/perf/temporal-chunks-2026-12-01.md), and Temporal warns about a
// payload over 256 kB and refuses one over 2 MB.
const MaxChunkEpochs = 200

// epochs trains the next chunk of epochs in one RunEpochs activity (ADR
// 0010), commits them in order, and settles the last one where the run is
// about to pause, stop or continue as new: the checkpoint and the
// backtest that the chunk's own cadence did not write are taken with the
// Checkpoint and Backtest activities (settle).
//
// Signals are taken at chunk boundaries: a chunk ends by itself within
// Options.ChunkBudget plus one epoch, which bounds how long a pause or a
// stop waits. The chunk is not cancelled for them, because a cancelled
// activity's result reaches the workflow only if it waits for the
// cancellation (WaitForCancellation), and then a dead worker's chunk
// would hold the run for its heartbeat timeout instead of failing with
// the session in SessionHeartbeatTimeout.
func (r *run) epochs() (outcome, error) {
	// A chunk ends where the run continues as new, or one epoch later
	// when the run paused there and resumed.
	until := min(r.cfg.Epochs, r.st.Epoch+MaxChunkEpochs)
	if r.o.ContinueAsNewEvery > 0 {
		until = min(until, max(r.started+r.o.ContinueAsNewEvery, r.st.Epoch+1))
	}
	r.setPhase("training")
	f := workflow.ExecuteActivity(r.o.stepCtx(r.sess.ctx), ta.RunEpochs, activities.EpochsInput{
		RunID: r.st.RunID, After: r.st.Epoch, Until: until, Budget: r.o.ChunkBudget, Scores: r.st.Scores,
	})
	// The previous chunk's retention runs beside this chunk.
	if err := r.flush(); err != nil {
		return outcome{}, err
	}
	var out activities.EpochsOutput
	if err := f.Get(r.ctx, &out); err != nil {
		if r.ctx.Err() == nil {
			// Also before a deterministic failure ends the run: its error
			// names the last good checkpoint (fail).
			r.adopt(until)
		}
		return outcome{}, err
	}
	last, early, err := r.commit(out)
	if err != nil {
		return outcome{}, err
	}
	e := last.Epoch
	r.takeSignals()
	o := outcome{final: e == r.cfg.Epochs, stopping: r.st.StopRequested, early: early}
	o.pausing = r.st.PauseRequested && !o.final && !o.stopping && !o.early
	o.moveOn = !o.final && !o.stopping && !o.pausing && !o.early &&
		(r.wantContinueAsNew(e) || workflow.GetInfo(r.ctx).GetCurrentHistorySize() >= r.o.HistorySizeLimit)
	needCk := (o.stopping || o.pausing || o.moveOn) && last.Checkpoint == nil
	needBt := (o.stopping || o.pausing) && last.ValidSharpe == nil
	if needCk || needBt {
		if o.early, err = r.settle(e, last.Train, needCk, needBt); err != nil {
			return outcome{}, err
		}
	}
	return o, nil
}

// commit commits a chunk's epochs to the run's state in order, with the
// scoring rules of settle (activities.Scores), and starts retention when
// the chunk wrote a checkpoint. It returns the last epoch and whether the
// patience ran out there. A chunk that does not continue from the
// committed epoch is refused as a lost trainer: the run restores its last
// checkpoint.
func (r *run) commit(out activities.EpochsOutput) (activities.EpochResult, bool, error) {
	if len(out.Epochs) == 0 {
		return activities.EpochResult{}, false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run %s: RunEpochs returned no epoch after epoch %d", r.st.RunID, r.st.Epoch), activities.ErrTypeTrainerLost, nil)
	}
	sc, early, checkpointed := r.st.Scores, false, false
	for _, ep := range out.Epochs {
		if ep.Epoch != r.st.Epoch+1 {
			return activities.EpochResult{}, false, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run %s: RunEpochs returned epoch %d after epoch %d", r.st.RunID, ep.Epoch, r.st.Epoch), activities.ErrTypeTrainerLost, nil)
		}
		e := ep.Epoch
		early = false
		if ep.ValidSharpe != nil {
			sc, early = sc.Add(e, *ep.ValidSharpe, r.cfg.Backtest.Patience)
		}
		if ck := ep.Checkpoint; ck != nil {
			if sc.BestEpoch == e {
				sc.BestCheckpoint = ck
			}
			r.st.LastCheckpoint, r.st.ScoresAtCheckpoint, checkpointed = ck, sc, true
		}
		r.st.Epoch, r.st.GlobalStep, r.st.Loss, r.st.Scores = e, ep.Train.GlobalStep, ep.Train.Loss, sc
		if e > r.st.Furthest {
			r.st.Furthest, r.st.Recoveries = e, 0
		}
	}
	r.publishProgress()
	if checkpointed {
		r.retain()
	}
	return out.Epochs[len(out.Epochs)-1], early, nil
}

// adopt commits the newest checkpoint that a failed chunk wrote and
// recorded before it failed, with the scores its validation backtests
// give through that epoch (the rules of commit), so that the recovery
// that follows restores it instead of the checkpoint the chunk started
// from (a lost worker loses nothing that was checkpointed), and a run
// that fails names it as its last good checkpoint. The store is
// asked once, for a minute at most; when it does not answer, the run
// recovers from its last committed checkpoint, as it would have.
func (r *run) adopt(until int) {
	ctx := workflow.WithScheduleToCloseTimeout(r.o.controlCtx(r.ctx), time.Minute)
	var left activities.LeftoversOutput
	if err := workflow.ExecuteActivity(ctx, ca.ChunkLeftovers, activities.LeftoversInput{
		RunID: r.st.RunID, After: r.st.Epoch, Until: until,
	}).Get(r.ctx, &left); err != nil {
		workflow.GetLogger(r.ctx).Warn("Reading what the failed chunk checkpointed failed; recovering from the last committed checkpoint",
			"run", r.st.RunID, "error", err)
		return
	}
	if len(left.Checkpoints) == 0 {
		return
	}
	last := left.Checkpoints[len(left.Checkpoints)-1]
	sharpes := make(map[int]float64, len(left.Sharpes))
	for _, s := range left.Sharpes {
		sharpes[s.Epoch] = s.Sharpe
	}
	cks := make(map[int]activities.CheckpointRef, len(left.Checkpoints))
	for _, ck := range left.Checkpoints {
		cks[ck.Epoch] = ck
	}
	sc := r.st.Scores
	for e := r.st.Epoch + 1; e <= last.Epoch; e++ {
		if s, ok := sharpes[e]; ok {
			sc, _ = sc.Add(e, s, r.cfg.Backtest.Patience)
		}
		if ck, ok := cks[e]; ok && sc.BestEpoch == e {
			sc.BestCheckpoint = &ck
		}
	}
	workflow.GetLogger(r.ctx).Info("The failed chunk checkpointed epochs beyond the run's last checkpoint; recovering from its newest",
		"run", r.st.RunID, "committed", r.st.Epoch, "checkpoint", last.URI, "epoch", last.Epoch)
	r.st.Epoch, r.st.GlobalStep, r.st.Scores = last.Epoch, last.GlobalStep, sc
	r.st.LastCheckpoint, r.st.ScoresAtCheckpoint = &last, sc
	if last.Epoch > r.st.Furthest {
		r.st.Furthest, r.st.Recoveries = last.Epoch, 0
	}
}
