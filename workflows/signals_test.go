package workflows_test

import (
	"slices"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/store"
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
			if !slices.Equal(f.statuses, []store.Status{store.StatusCompleted}) {
				t.Errorf("statuses %v, want [completed]", f.statuses)
			}
			if r.Epochs != 4 || r.Status != store.StatusCompleted {
				t.Errorf("result %+v, want completed after 4 epochs", r)
			}
		})
	}
}
