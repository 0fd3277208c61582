package workflows

import (
	"strings"

	"go.temporal.io/sdk/workflow"
)

// childWorkflowID is the workflow id, and so the run id, of a child run:
// "<parent workflow id>-<last 8 hex digits of the parent's run id>-<name>".
// The parent's run id keeps two executions of one workflow id apart: a
// Schedule triggered twice within a second starts two Retrains with the
// same workflow id, and their challengers must not share a run id, whose
// checkpoint directory the second would overwrite. Executions that began
// before this scheme keep "<parent workflow id>-<name>".
func childWorkflowID(ctx workflow.Context, name string) string {
	info := workflow.GetInfo(ctx).WorkflowExecution
	if version(ctx, changeChildID) == workflow.DefaultVersion {
		return info.ID + "-" + name
	}
	run := strings.ReplaceAll(info.RunID, "-", "")
	if len(run) > 8 {
		run = run[len(run)-8:]
	}
	return info.ID + "-" + run + "-" + name
}
