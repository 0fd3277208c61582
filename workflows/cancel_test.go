package workflows_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestCancelClosesTheTrainerAndCompletesTheSession cancels a run in the
// middle of epoch 2 (of its second chunk of one epoch): its clean-up must
// still reach the GPU worker, closing the trainer (device memory) and
// completing the session (the slot), and the run must be recorded as
// canceled.
func TestCancelClosesTheTrainerAndCompletesTheSession(t *testing.T) {
	f := newFake()
	env := newEnv(t, f, workflows.Options{})
	var (
		mu          sync.Mutex
		completions int
	)
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == sessionCompletionActivity {
			mu.Lock()
			completions++
			mu.Unlock()
		}
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, trainTime+trainTime/2)
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(4, 1, 1))
	if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow ended with %v, want canceled", err)
	}
	if seq := f.sequence(); !strings.HasSuffix(seq, " X") {
		t.Errorf("activities %s: the trainer was not closed", seq)
	}
	if completions != 1 {
		t.Errorf("session completed %d times, want once", completions)
	}
	if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusCanceled}) {
		t.Errorf("statuses %v, want [canceled]", f.statuses)
	}
}
