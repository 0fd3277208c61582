package workflows_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestWalkForwardResumesAStudyUnderItsID runs walkforward's fixture
// study (one seed, two windows) on a Temporal dev server with the real
// activities (the CPU backend, PostgreSQL), then leaves window 1 in the
// store without its results, as a study terminated while window 1
// trained leaves it, and starts the study again under its id. The new
// execution takes window 0 from the store and trains window 1 alone (its
// one child), and the store holds the rows of the first execution again
// (the CPU backend trains window 1 to the same results). A third
// execution trains nothing; one with another config fails at once,
// non-retryably, naming the config, and leaves the store as it was.
//
// With -record it saves the second execution's history as
// rec7-walkforward.resumed.json (the new branch of
// walkforward-resumes-recorded-windows):
//
//	DATABASE_URL=... go test ./workflows -run TestWalkForwardResumesAStudyUnderItsID -record
func TestWalkForwardResumesAStudyUnderItsID(t *testing.T) {
	const id = "rec7-walkforward"
	c, st, spec := recordableStudy(t, "dqnflow_wf_resume", id)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	in := workflows.WalkForwardInput{WalkForwardSpec: spec, MaxConcurrent: 1}
	start := func(in workflows.WalkForwardInput) (workflows.WalkForwardResult, string, error) {
		t.Helper()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.ControlTaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, workflows.WalkForwardName, in)
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.WalkForwardResult
		err = r.Get(ctx, &res)
		return res, r.GetRunID(), err
	}
	children := func(runID string) []string {
		t.Helper()
		var ids []string
		it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
				ids = append(ids, a.GetWorkflowId())
			}
		}
		return ids
	}

	if _, _, err := start(in); err != nil {
		t.Fatalf("first execution: %v", err)
	}
	first, err := st.GetWalkForward(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Windows) != 2 || len(first.Results) == 0 {
		t.Fatalf("first execution stored %d windows, %d results; want 2 windows with results", len(first.Windows), len(first.Results))
	}
	// Window 1 laid but not recorded: the header's row, no results.
	if err := st.RecordWalkForwardWindow(ctx, id, first.Windows[1], nil); err != nil {
		t.Fatal(err)
	}

	res, runID, err := start(in)
	if err != nil {
		t.Fatalf("second execution: %v", err)
	}
	if got := children(runID); !slices.Equal(got, []string{id + "-window-001"}) || !slices.Equal(res.Resumed, []int{0}) {
		t.Errorf("second execution started children %v, resumed %v; want window 1's alone, window 0 resumed", got, res.Resumed)
	}
	second, err := st.GetWalkForward(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second.Results, first.Results) || !reflect.DeepEqual(second.Windows, first.Windows) {
		t.Errorf("after the resume the store holds %d results, want the first execution's %d, equal field for field", len(second.Results), len(first.Results))
	}
	if len(res.Output.Results) != len(first.Results) || res.Recorded != len(first.Results) {
		t.Errorf("second execution's result: %d results, %d recorded; want %d", len(res.Output.Results), res.Recorded, len(first.Results))
	}
	if *record {
		saveHistory(ctx, t, c, id, runID, id+".resumed.json")
	}

	res, runID, err = start(in)
	if err != nil || len(children(runID)) != 0 || !slices.Equal(res.Resumed, []int{0, 1}) {
		t.Errorf("third execution: error %v, children %v, resumed %v; want no child, both windows resumed", err, children(runID), res.Resumed)
	}

	other := in
	other.Config.Epochs++
	if _, _, err := start(other); !hasErrorType(err, activities.ErrTypeInvalidConfig) || !strings.Contains(fmt.Sprint(err), "another config") {
		t.Errorf("an execution with another config ended with %v; want InvalidConfig naming the config", err)
	}
	after, err := st.GetWalkForward(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Results, first.Results) || string(after.Config) != string(first.Config) {
		t.Errorf("the refused execution changed the store: %d results, config %s", len(after.Results), after.Config)
	}
}
