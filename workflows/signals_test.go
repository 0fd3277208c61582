package workflows_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestResumeDuringThePausesCheckpointCancelsThePause sends pause during
// epoch 2 and resume while the pause is being taken (during epoch 2's
// checkpoint, or its backtest): the resume must not be lost, so the run
// keeps training and completes instead of waiting for ever.
func TestResumeDuringThePausesCheckpointCancelsThePause(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during func(f *fakeGPU)
	}{
		{"checkpoint", func(f *fakeGPU) { f.checkpointTime = 10 * time.Minute }},
		{"backtest", func(f *fakeGPU) { f.backtestTime = 10 * time.Minute }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.during(f)
			env := newEnv(t, f, workflows.Options{})
			// Epoch 2 trains during [10m, 20m); its checkpoint or backtest
			// runs during [20m, 30m).
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.PauseSignal, nil) }, trainTime+trainTime/2)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ResumeSignal, nil) }, 2*trainTime+5*time.Minute)
			env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(4, 10, 10))
			r := result(t, env)
			if want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 C3 T3 S3 C4 T4 S4 K4 B4 X"; f.sequence() != want {
				t.Errorf("activities:\n got %s\nwant %s (the resume cancels the pause: the trainer stays)", f.sequence(), want)
			}
			if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusCompleted}) {
				t.Errorf("statuses %v, want [completed]", f.statuses)
			}
			if r.Epochs != 4 || r.Status != metadata.StatusCompleted {
				t.Errorf("result %+v, want completed after 4 epochs", r)
			}
		})
	}
}

// TestSignalInTheContinueAsNewTaskIsCarried sends pause, or stop, so that
// it reaches the workflow in the same workflow task as the result of the
// last activity the run waits for before it continues as new (the
// completion of its session after epoch 2's checkpoint), as a signal sent
// while the continue-as-new task runs does on a real server: the next
// run's state must carry it.
func TestSignalInTheContinueAsNewTaskIsCarried(t *testing.T) {
	for _, signal := range []string{workflows.PauseSignal, workflows.StopSignal} {
		t.Run(signal, func(t *testing.T) {
			f := newFake()
			env := newEnv(t, f, workflows.Options{ContinueAsNewEvery: 2})
			env.OnActivity(sessionCompletionActivity, mock.Anything, mock.Anything).Return(
				func(context.Context, string) error {
					env.SignalWorkflowSkippingWorkflowTask(signal, nil)
					return nil
				})
			env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(6, 2, 10))
			next := continuedState(t, env)
			if next.Epoch != 2 {
				t.Fatalf("continued at epoch %d, want 2", next.Epoch)
			}
			if got := map[string]bool{workflows.PauseSignal: next.PauseRequested, workflows.StopSignal: next.StopRequested}[signal]; !got {
				t.Errorf("the %s signal is not in the next run's state %+v", signal, next)
			}
		})
	}
}

// sessionCompletionActivity is the Go SDK's activity that completes a
// session (workflow.CompleteSession runs it on the session's worker).
const sessionCompletionActivity = "internalSessionCompletionActivity"

// continuedState returns the state TrainingRun continued as new with.
func continuedState(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.RunState {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want a continue-as-new", err)
	}
	var (
		cfg  config.RunConfig
		next workflows.RunState
	)
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &cfg, &next); err != nil {
		t.Fatal(err)
	}
	return next
}
