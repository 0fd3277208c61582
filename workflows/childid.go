package workflows

import (
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"
)

// childWorkflowID is the workflow id, and so the run id, of a child run:
// "<parent workflow id>-<last 8 hex digits of the parent's run id>-<name>".
// The parent's run id keeps two executions of one workflow id apart: a
// Schedule triggered twice within a second starts two Retrains with the
// same workflow id, and their challengers must not share a run id, whose
// checkpoint directory the second would overwrite.
func childWorkflowID(ctx workflow.Context, name string) string {
	info := workflow.GetInfo(ctx).WorkflowExecution
	run := strings.ReplaceAll(info.RunID, "-", "")
	if len(run) > 8 {
		run = run[len(run)-8:]
	}
	return info.ID + "-" + run + "-" + name
}

// childOptions are the options of child run id on the control queue. A
// cancelled (or terminated) parent asks its children to cancel, and a
// cancelled parent waits until they have: a child run then closes its
// trainer, frees its slot and records its status, where the default
// policy would terminate it mid-epoch.
func (o Options) childOptions(id string) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID: id, TaskQueue: o.ControlTaskQueue,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL, WaitForCancellation: true,
	}
}
