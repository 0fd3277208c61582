package workflows_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
)

func TestRunFollowsTheEpochOrderAndCadence(t *testing.T) {
	f := newFake()
	f.sharpe = func(e int) float64 { return 1 / float64(e) } // best at the first backtest
	env := newEnv(t, f, workflows.Options{})
	cfg := smallConfig(5, 2, 2)
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	r := result(t, env)

	// Checkpoints at 2 and 4 (every 2) and 5 (the last epoch), backtests
	// likewise, each checkpoint before its backtest.
	want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 C3 T3 S3 C4 T4 S4 K4 B4 C5 T5 S5 K5 B5 X"
	if got := f.sequence(); got != want {
		t.Errorf("activities:\n got %s\nwant %s", got, want)
	}
	if !slices.Equal(f.epochs, []int{1, 2, 3, 4, 5}) {
		t.Errorf("recorded epochs %v, want 1..5", f.epochs)
	}
	if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusCompleted}) {
		t.Errorf("statuses %v, want [completed]", f.statuses)
	}
	if len(f.recorded) != 1 || f.recorded[0].Config != cfg || f.devices != 1 {
		t.Errorf("run recorded %d times (device %d times), want once with the config", len(f.recorded), f.devices)
	}
	if r.Status != metadata.StatusCompleted || r.Epochs != 5 || r.BestEpoch != 2 || r.BestValidSharpe != 0.5 ||
		r.BestCheckpoint == nil || r.BestCheckpoint.Epoch != 2 || r.LastCheckpoint.Epoch != 5 || r.GlobalStep != 50 {
		t.Errorf("result %+v: want completed after 5 epochs, best epoch 2 (Sharpe 0.5, checkpoint 2), last checkpoint 5", r)
	}
}

func TestNewBestValidationScoreIsAlwaysCheckpointed(t *testing.T) {
	f := newFake() // rising Sharpe: every backtest is a new best
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(3, 10, 1))
	r := result(t, env)
	if want := "O0 C1 T1 S1 K1 B1 C2 T2 S2 K2 B2 C3 T3 S3 K3 B3 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	if r.BestEpoch != 3 || r.BestCheckpoint.Epoch != 3 {
		t.Errorf("best epoch %d checkpoint %+v, want 3", r.BestEpoch, r.BestCheckpoint)
	}
}

func TestRetentionFollowsEveryCheckpointAndKeepsLastAndBest(t *testing.T) {
	f := newFake()
	f.sharpe = func(e int) float64 { return map[int]float64{1: 0.5, 2: 0.9, 3: 0.1, 4: 0.2}[e] }
	env := newEnv(t, f, workflows.Options{})
	cfg := smallConfig(4, 1, 1)
	cfg.Checkpoint.KeepLast, cfg.Checkpoint.KeepBest = 2, 1
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	result(t, env)
	if len(f.retentions) != 4 {
		t.Fatalf("%d retention calls, want one per checkpoint (4)", len(f.retentions))
	}
	for i, in := range f.retentions {
		e := i + 1
		best := min(e, 2) // best so far: epoch 1, then 2
		want := []string{ckRef(e).URI, ckRef(best).URI}
		if in.KeepLast != 2 || in.KeepBest != 1 || !slices.Equal(in.Keep, want) {
			t.Errorf("retention after epoch %d = %+v, want keep_last 2, keep_best 1, keep %v", e, in, want)
		}
	}
}

func TestStartsFromTheUIsSinglePayload(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input []any
		want  func() config.RunConfig
	}{
		{"partial JSON", []any{json.RawMessage(`{"epochs": 2, "backtest": {"every": 2}}`)}, func() config.RunConfig {
			c := config.Defaults()
			c.Epochs, c.Backtest.Every = 2, 2
			return c
		}},
		{"empty object", []any{json.RawMessage(`{}`)}, config.Defaults},
		{"no input", nil, config.Defaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			env := newEnv(t, f, workflows.Options{})
			env.ExecuteWorkflow(workflows.TrainingRunName, tc.input...)
			r := result(t, env)
			want := tc.want()
			if len(f.recorded) != 1 || f.recorded[0].Config != want || r.Epochs != want.Epochs {
				t.Errorf("ran %d epochs with %+v; want the defaults with the given keys", r.Epochs, f.recorded)
			}
		})
	}
}

func TestInvalidConfigFailsBeforeAnyActivity(t *testing.T) {
	f := newFake()
	env := newEnv(t, f, workflows.Options{})
	cfg := config.Defaults()
	cfg.Optim.LR = 5
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeInvalidConfig || !ae.NonRetryable() || !strings.Contains(err.Error(), "optim.lr") {
		t.Fatalf("error %v: want a non-retryable %s error naming optim.lr", err, activities.ErrTypeInvalidConfig)
	}
	var details map[string]string
	if ae.Details(&details) != nil || details["field"] != "optim.lr" {
		t.Errorf("error details %v, want field optim.lr", details)
	}
	if f.sequence() != "" || len(f.recorded)+len(f.statuses) != 0 {
		t.Errorf("activities ran: %q, recorded %v, statuses %v", f.sequence(), f.recorded, f.statuses)
	}
}

func TestPauseCheckpointsReleasesAndResumes(t *testing.T) {
	f := newFake()
	env := newEnv(t, f, workflows.Options{})
	cfg := smallConfig(4, 10, 10)
	// The pause arrives during epoch 2; the resume hours later.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.PauseSignal, nil) }, trainTime+trainTime/2)
	var paused workflows.Progress
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.ProgressQuery)
		if err != nil {
			t.Error(err)
			return
		}
		if err := v.Get(&paused); err != nil {
			t.Error(err)
		}
	}, 2*time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ResumeSignal, nil) }, 3*time.Hour)
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	r := result(t, env)

	want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 X O2 C3 T3 S3 C4 T4 S4 K4 B4 X"
	if f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	if len(f.opens) != 2 || f.opens[1].Resume == nil || f.opens[1].Resume.Epoch != 2 || f.opens[1].Epoch != 2 {
		t.Errorf("opens %+v: want the resume to open from the epoch 2 checkpoint", f.opens)
	}
	if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusPaused, metadata.StatusRunning, metadata.StatusCompleted}) {
		t.Errorf("statuses %v, want paused, running, completed", f.statuses)
	}
	if paused.Status != metadata.StatusPaused || paused.Epoch != 2 || paused.Epochs != 4 || paused.Step != 20 ||
		paused.LastCheckpoint == nil || paused.LastCheckpoint.Epoch != 2 || paused.Phase != "paused" {
		t.Errorf("progress while paused %+v: want paused at epoch 2/4, step 20, checkpoint 2", paused)
	}
	if r.Epochs != 4 || r.Status != metadata.StatusCompleted {
		t.Errorf("result %+v, want completed after 4 epochs", r)
	}
}

func TestStopEndsWithAFinalCheckpointAndBacktest(t *testing.T) {
	f := newFake()
	env := newEnv(t, f, workflows.Options{})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.StopSignal, nil) }, trainTime+trainTime/2)
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(10, 5, 5))
	r := result(t, env)
	if want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	if r.Status != metadata.StatusStopped || r.Epochs != 2 || r.LastCheckpoint.Epoch != 2 || r.BestEpoch != 2 {
		t.Errorf("result %+v: want stopped after epoch 2 with its checkpoint and backtest", r)
	}
	if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusStopped}) {
		t.Errorf("statuses %v, want [stopped]", f.statuses)
	}
}

func TestEarlyStopAfterPatienceBacktestsWithoutProgress(t *testing.T) {
	f := newFake()
	f.sharpe = func(e int) float64 { return map[int]float64{1: 1.0, 2: 0.5, 3: 1.0}[e] } // a tie is no progress
	env := newEnv(t, f, workflows.Options{})
	cfg := smallConfig(10, 5, 1)
	cfg.Backtest.Patience = 2
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	r := result(t, env)
	if want := "O0 C1 T1 S1 K1 B1 C2 T2 S2 B2 C3 T3 S3 K3 B3 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	if r.Status != metadata.StatusEarlyStopped || r.Epochs != 3 || r.BestEpoch != 1 || r.BestCheckpoint.Epoch != 1 || r.LastCheckpoint.Epoch != 3 {
		t.Errorf("result %+v: want early_stopped at epoch 3, best epoch 1", r)
	}
}

func TestContinueAsNewCarriesTheRunAfterACheckpoint(t *testing.T) {
	f := newFake()
	opts := workflows.Options{ContinueAsNewEvery: 2}
	cfg := smallConfig(5, 3, 1)
	var (
		state *workflows.RunState
		r     workflows.RunResult
		runs  int
	)
	for runs = 1; runs <= 5; runs++ {
		env := newEnv(t, f, opts)
		env.ExecuteWorkflow(workflows.TrainingRunName, cfg, state)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			r = result(t, env)
			break
		}
		if can.WorkflowType.Name != workflows.TrainingRunName {
			t.Fatalf("continued as %q", can.WorkflowType.Name)
		}
		var next workflows.RunState
		var nextCfg config.RunConfig
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &nextCfg, &next); err != nil {
			t.Fatal(err)
		}
		e := 2 * runs
		if nextCfg != cfg || next.Epoch != e || next.LastCheckpoint == nil || next.LastCheckpoint.Epoch != e ||
			next.GlobalStep != int64(10*e) || len(next.SessionToken) == 0 || !next.Recorded ||
			next.Scores.BestEpoch != e || next.Scores.BestCheckpoint.Epoch != e || next.Status != metadata.StatusRunning {
			t.Fatalf("continue-as-new %d carries %+v: want epoch %d with its checkpoint, best score and a session token", runs, next, e)
		}
		state = &next
	}
	if runs != 3 {
		t.Fatalf("%d workflow runs, want 3 (epochs 1-2, 3-4, 5)", runs)
	}
	if len(f.recorded) != 1 {
		t.Errorf("run recorded %d times, want once", len(f.recorded))
	}
	// Every continuation opens at the checkpoint it was handed, after the
	// worker was asked to hold the slot for it; no epoch is trained twice.
	if want := "O0 C1 T1 S1 K1 B1 C2 T2 S2 K2 B2 H O2 C3 T3 S3 K3 B3 C4 T4 S4 K4 B4 H O4 C5 T5 S5 K5 B5 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	if r.Epochs != 5 || r.Status != metadata.StatusCompleted || r.BestEpoch != 5 {
		t.Errorf("result %+v: want completed after 5 epochs", r)
	}
}

func TestLostWorkerResumesFromTheLastCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
	}{
		{"heartbeat timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)},
		{"session failed", workflow.ErrSessionFailed},
		{"trainer lost", temporal.NewNonRetryableApplicationError("worker restarted", activities.ErrTypeTrainerLost, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.trainErr = func(e, n int) error {
				if e == 3 && n == 1 {
					return tc.cause
				}
				return nil
			}
			env := newEnv(t, f, workflows.Options{})
			env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(4, 2, 2))
			r := result(t, env)
			if want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 C3 T3 O2 C3 T3 S3 C4 T4 S4 K4 B4 X"; f.sequence() != want {
				t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
			}
			if len(f.opens) != 2 || f.opens[1].Resume == nil || *f.opens[1].Resume != ckRef(2) {
				t.Errorf("reopened with %+v, want the epoch 2 checkpoint", f.opens)
			}
			if r.Epochs != 4 || r.Status != metadata.StatusCompleted || r.LastCheckpoint.Epoch != 4 {
				t.Errorf("result %+v, want completed after 4 epochs", r)
			}
		})
	}
}

func TestLossBeforeTheFirstCheckpointStartsOver(t *testing.T) {
	f := newFake()
	f.trainErr = func(e, n int) error {
		if e == 2 && n == 1 {
			return errors.New("worker gone")
		}
		return nil
	}
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(2, 2, 2))
	result(t, env)
	if want := "O0 C1 T1 S1 C2 T2 O0 C1 T1 S1 C2 T2 S2 K2 B2 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
}

func TestRepeatedLossWithoutProgressFailsTheRun(t *testing.T) {
	f := newFake()
	f.trainErr = failEpoch(3, "crash", activities.ErrTypeTrainerLost)
	env := newEnv(t, f, workflows.Options{MaxRecoveries: 2})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(5, 2, 2))
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != workflows.ErrTypeTooManyRecoveries {
		t.Fatalf("error %v, want %s", err, workflows.ErrTypeTooManyRecoveries)
	}
	if len(f.opens) != 3 {
		t.Errorf("%d opens, want the first and 2 recoveries", len(f.opens))
	}
	if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusFailed}) {
		t.Errorf("statuses %v, want [failed]", f.statuses)
	}
}

func TestDeterministicFailureEndsTheRunWithoutRecovery(t *testing.T) {
	f := newFake()
	f.trainErr = failEpoch(2, "loss is NaN", activities.ErrTypeNonFinite)
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(4, 1, 1))
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeNonFinite {
		t.Fatalf("error %v, want %s", err, activities.ErrTypeNonFinite)
	}
	if want := "O0 C1 T1 S1 K1 B1 C2 T2 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusFailed}) {
		t.Errorf("statuses %v, want [failed]", f.statuses)
	}
}

// TestRunUsesTheRunIDTheStoreAssigned starts a run under a workflow id
// that an earlier run used: the store records it as
// "<workflow id>.<execution id>", and every later activity must use that
// key, with the first execution's id, never the earlier run's rows or
// checkpoint directory.
func TestRunUsesTheRunIDTheStoreAssigned(t *testing.T) {
	f := newFake()
	f.storeRunID = "default-test-workflow-id.second"
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(2, 1, 1))
	r := result(t, env)
	if len(f.recorded) != 1 || f.recorded[0].RunID != "default-test-workflow-id" || f.recorded[0].ExecutionID != "default-test-run-id" {
		t.Fatalf("recorded %+v, want the workflow id and the first execution's run id", f.recorded)
	}
	if r.RunID != f.storeRunID || len(f.runIDs) != 1 || !f.runIDs[f.storeRunID] {
		t.Errorf("result run id %s, trainer activities used %v; want only %s", r.RunID, f.runIDs, f.storeRunID)
	}
	if len(f.opens) != 1 || f.opens[0].ExecutionID != "default-test-run-id" {
		t.Errorf("opens %+v, want the first execution's id", f.opens)
	}
}
