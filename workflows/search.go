package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Custom search attributes TrainingRun keeps up to date, so that the UI's
// workflow list can show and filter runs by epoch, best validation Sharpe
// and status (e.g. `DqnStatus = "running" AND DqnBestValidSharpe > 1`).
//
// They must be registered in the namespace before a worker runs the
// workflow: an upsert of an unknown attribute fails the workflow task, and
// the run stalls until they are. `dqnflow dev` starts the dev server with
// them (see SearchAttributes), and worker.EnsureSearchAttributes registers
// them on a server that lacks them.
var (
	EpochKey           = temporal.NewSearchAttributeKeyInt64("DqnEpoch")
	BestValidSharpeKey = temporal.NewSearchAttributeKeyFloat64("DqnBestValidSharpe")
	StatusKey          = temporal.NewSearchAttributeKeyKeyword("DqnStatus")
)

// SearchAttributes maps each custom search attribute to its type, for
// registration.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	EpochKey.GetName():           enumspb.INDEXED_VALUE_TYPE_INT,
	BestValidSharpeKey.GetName(): enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	StatusKey.GetName():          enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// publish upserts the run's search attributes now: when the run starts
// and when its status changes.
func (r *run) publish() {
	updates := []temporal.SearchAttributeUpdate{
		EpochKey.ValueSet(int64(r.st.Epoch)),
		StatusKey.ValueSet(string(r.st.Status)),
	}
	if r.st.Scores.BestEpoch > 0 {
		updates = append(updates, BestValidSharpeKey.ValueSet(r.st.Scores.BestValidSharpe))
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, updates...); err != nil {
		workflow.GetLogger(r.ctx).Warn("Upserting search attributes failed", "error", err)
	}
	r.published = workflow.Now(r.ctx)
}

// publishProgress upserts the search attributes after an epoch, unless the
// last upsert is less than Options.SearchAttributesEvery ago (workflow
// time): then the epoch shows with a later one. Each upsert is an event in
// the run's history and a write to the visibility store, which a GPU epoch
// of tens of milliseconds must not pay for.
func (r *run) publishProgress() {
	if workflow.Now(r.ctx).Sub(r.published) < r.o.SearchAttributesEvery {
		return
	}
	r.publish()
}
