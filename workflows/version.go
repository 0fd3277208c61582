package workflows

import "go.temporal.io/sdk/workflow"

// Change ids of the workflow.GetVersion patches (ADR 0004). A workflow
// execution that began before a change replays its recorded history with
// workflow.DefaultVersion and keeps the old behaviour; one that reaches the
// patched code afterwards records version 1 and takes the new one. A
// patch is removed only when no execution that could replay the old branch
// is left (open, or closed but still queried within the namespace's
// retention), and the replay test's histories of it are retired with it.
const (
	// changeChildID: child run ids include the parent's run id
	// (childWorkflowID), so that two Retrains under one workflow id do not
	// share a challenger.
	changeChildID = "child-id-includes-parent-run"
	// changeResumeDuringPause: a resume that arrives while a pause is
	// being taken (its checkpoint or backtest) cancels the pause; before
	// it, pause() cleared it and the run waited for ever.
	changeResumeDuringPause = "resume-during-pause"
	// changeSignalDrain: TrainingRun takes its signals from their channels
	// where it decides on them and before a Continue-As-New, instead of in
	// a goroutine that could run after the continue-as-new was decided.
	changeSignalDrain = "signals-taken-at-decisions"
	// changeSearchAttributesEvery: search attributes are upserted after an
	// epoch only when Options.SearchAttributesEvery has passed since the
	// last upsert.
	changeSearchAttributesEvery = "search-attributes-every"
	// changeSessionOutlivesCancel: sessions are created on a context
	// disconnected from the workflow's cancellation, so that CloseTrainer
	// and the session's completion are sent after a cancel; each attempt to
	// create one is bounded by a timer.
	changeSessionOutlivesCancel = "session-cleanup-outlives-cancel"
	// changeChildrenCancelled: Retrain's and Sweep's child runs use the
	// parent-close policy REQUEST_CANCEL and are waited for when the parent
	// is cancelled, instead of being terminated.
	changeChildrenCancelled = "children-request-cancel"
	// changeSweepConcurrencyBound: Sweep refuses a max_concurrent outside
	// [0, MaxSweepConcurrent].
	changeSweepConcurrencyBound = "sweep-concurrency-bound"
	// changeSlotKeptAcrossCAN: before a Continue-As-New, TrainingRun asks
	// its worker to hold the slot for the next run (HoldSlot).
	changeSlotKeptAcrossCAN = "slot-kept-across-continue-as-new"
	// changeEpochChunks: TrainingRun trains a chunk of epochs per
	// RunEpochs activity (ADR 0010) instead of an activity per stage and
	// epoch; the choice is taken once per workflow run, so an execution
	// keeps its path until it continues as new.
	changeEpochChunks = "epochs-in-chunks"
	// changeRetrainEvidence: Retrain promotes a challenger only when its
	// validation Sharpe shows evidence (t-statistic at least the config's
	// backtest.min_valid_t, ADR 0016), with a champion or without one.
	changeRetrainEvidence = "retrain-needs-evidence"
	// changeStoppedSessionLeft: a run whose chunk a stopping GPU worker
	// ended (activities.ErrTypeWorkerStopping) leaves the session to end
	// with the worker instead of completing it, which waited 3 s for a
	// completion activity that the stopped worker never takes. Guarded
	// although the error type is new: a GPU worker upgraded before the
	// control workers returns it to workflows that completed the session.
	changeStoppedSessionLeft = "stopped-worker-session-left"
	// changeWalkForwardResume: before its header, WalkForward reads what
	// the store holds of the study (Control.WalkForwardResume) and trains
	// only the windows an earlier execution under its id did not record.
	changeWalkForwardResume = "walkforward-resumes-recorded-windows"
	// changeRunRecommendation: a TrainingRun that ends with a best
	// checkpoint records in it what the run recommends, trade or flat
	// (Control.RecordRecommendation), as "dqnflow train" does.
	changeRunRecommendation = "run-records-recommendation"
)

// changes lists every change id above; the replay test requires a recorded
// history of each (TestEveryChangeHasARecordedHistory).
var changes = []string{
	changeChildID, changeResumeDuringPause, changeSignalDrain, changeSearchAttributesEvery,
	changeSessionOutlivesCancel, changeChildrenCancelled, changeSweepConcurrencyBound, changeSlotKeptAcrossCAN,
	changeEpochChunks, changeRetrainEvidence, changeStoppedSessionLeft, changeWalkForwardResume,
	changeRunRecommendation,
}

// version is workflow.GetVersion(ctx, change, DefaultVersion, 1): every
// change here has one new version.
func version(ctx workflow.Context, change string) workflow.Version {
	return workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1)
}
