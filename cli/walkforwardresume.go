package cli

import (
	"context"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/workflows"
)

// checkResume decides what "walkforward start" does with an id that
// Temporal knows already (ADR 0041, addendum). It returns false for a
// new id. For the id of a study whose last execution has ended
// (completed, failed, canceled, terminated, timed out) it returns true:
// the new execution resumes it, and the WalkForward workflow takes the
// windows that execution recorded from the store. It refuses a study
// that is still running, a workflow of another type, and, unless fresh,
// a study started with other settings (config, series, layout, seeds,
// left out, gate, panel, prior trials), naming what differs.
func checkResume(ctx context.Context, c client.Client, id string, in workflows.WalkForwardInput, fresh bool) (bool, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up workflow %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if typ := info.GetType().GetName(); typ != workflows.WalkForwardName {
		return false, fmt.Errorf("%w: --id %s is a %s workflow, not a walk-forward study; choose another --id", errUsage, id, typ)
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, fmt.Errorf("%w: walk-forward study %s is running; wait for it to end, or cancel it (temporal workflow cancel --workflow-id %s) and start it again to resume it",
			errUsage, id, id)
	}
	if fresh {
		return true, nil
	}
	prev, err := startInput(ctx, c, id, info.GetExecution().GetRunId())
	if err != nil {
		return false, err
	}
	a, err := walkforward.StudyRecord(id, studyHeader(prev.WalkForwardSpec))
	if err != nil {
		return false, err
	}
	b, err := walkforward.StudyRecord(id, studyHeader(in.WalkForwardSpec))
	if err != nil {
		return false, err
	}
	if d := walkforward.StudyDiff(a, b); len(d) > 0 {
		return false, fmt.Errorf("%w: walk-forward study %s was started with another %s; start this one under another --id, or with --fresh to train every window again under this id",
			errUsage, id, strings.Join(d, ", "))
	}
	return true, nil
}

// startInput is the input that execution runID of workflow id was
// started with: the first event of its history.
func startInput(ctx context.Context, c client.Client, id, runID string) (workflows.WalkForwardInput, error) {
	var in workflows.WalkForwardInput
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("workflow %s: no history to read its input from", id)
	}
	e, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("workflow %s: read its history: %w", id, err)
	}
	attrs := e.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("workflow %s: its history does not begin with its start", id)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("workflow %s: decode its input: %w", id, err)
	}
	return in, nil
}

// studyHeader is the part of a study's header that its spec fixes, for
// walkforward.StudyDiff.
func studyHeader(s activities.WalkForwardSpec) walkforward.Output {
	gate := s.Gate
	if gate == "" {
		gate = walkforward.GateWindow
	}
	return walkforward.Output{Config: s.Config, Series: s.Series, Layout: s.Layout, Seeds: s.Seeds, LeaveOut: s.LeaveOut,
		Gate: gate, Panel: s.Panel, Trials: walkforward.Trials{Prior: s.PriorTrials}}
}
