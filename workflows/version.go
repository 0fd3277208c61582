package workflows

import "go.temporal.io/sdk/workflow"

// Change ids of the workflow.GetVersion patches that are live (ADR 0004).
// A workflow execution that began before a change replays its recorded
// history with workflow.DefaultVersion and keeps the old behaviour; one
// that reaches the patched code afterwards records version 1 and takes
// the new one.
//
// This build replays the executions of the supported upgrade path (ADR
// 0046): those whose workflow runs began on a build with
// retrain-needs-evidence, the last of the changes in retired. Every
// change from then on stays a patch here until a later release moves the
// supported path past it.
const (
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

// changes lists every live change id above; the replay test requires a
// recorded history of each (TestEveryChangeHasARecordedHistory).
var changes = []string{changeStoppedSessionLeft, changeWalkForwardResume, changeRunRecommendation}

// retired lists the change ids whose patches were removed (ADR 0046):
// every execution of the supported upgrade path took their new branch,
// which is now the only code. The histories of that path still hold
// their version markers, which a replay skips (the SDK does not match a
// version marker against a command), so the markers are no
// non-determinism; they are listed so that the replay test can tell them
// from a change id that version.go forgot.
//
//   - child-id-includes-parent-run: child run ids include the parent's run
//     id (childWorkflowID).
//   - resume-during-pause: a resume that arrives while a pause is being
//     taken cancels the pause.
//   - signals-taken-at-decisions: TrainingRun takes its signals from their
//     channels where it decides on them and before a Continue-As-New.
//   - search-attributes-every: search attributes are upserted after an
//     epoch only when Options.SearchAttributesEvery has passed.
//   - session-cleanup-outlives-cancel: sessions are created on a context
//     disconnected from the workflow's cancellation.
//   - children-request-cancel: child runs use the parent-close policy
//     REQUEST_CANCEL and are waited for when the parent is cancelled.
//   - sweep-concurrency-bound: Sweep refuses a max_concurrent outside
//     [0, MaxSweepConcurrent].
//   - slot-kept-across-continue-as-new: before a Continue-As-New,
//     TrainingRun asks its worker to hold the slot (HoldSlot).
//   - epochs-in-chunks: TrainingRun trains a chunk of epochs per RunEpochs
//     activity (ADR 0010) instead of an activity per stage and epoch.
//   - retrain-needs-evidence: Retrain promotes a challenger only when its
//     validation Sharpe shows evidence (ADR 0016).
var retired = []string{
	"child-id-includes-parent-run", "resume-during-pause", "signals-taken-at-decisions", "search-attributes-every",
	"session-cleanup-outlives-cancel", "children-request-cancel", "sweep-concurrency-bound",
	"slot-kept-across-continue-as-new", "epochs-in-chunks", "retrain-needs-evidence",
}

// version is workflow.GetVersion(ctx, change, DefaultVersion, 1): every
// change here has one new version.
func version(ctx workflow.Context, change string) workflow.Version {
	return workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1)
}
