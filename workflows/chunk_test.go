package workflows_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestChunksOfThreeTrainTheSameEpochsAsChunksOfOne runs each scenario once
// in RunEpochs chunks of one epoch (what the per-stage activities of the
// executions before ADR 0010 did, an epoch at a time) and once in chunks
// of three: the per-epoch sequence of collect, train, sync, checkpoint and
// backtest, the epoch rows and the run's result must be the same, with
// fewer activities.
func TestChunksOfThreeTrainTheSameEpochsAsChunksOfOne(t *testing.T) {
	patience := func(cfg config.RunConfig, p int) config.RunConfig { cfg.Backtest.Patience = p; return cfg }
	for _, tc := range []struct {
		name     string
		cfg      config.RunConfig
		sharpe   func(int) float64
		trainErr func(e, n int) error
		opts     workflows.Options
		want     string
	}{{
		name:   "cadence: checkpoints and backtests every 2 and at the end",
		cfg:    smallConfig(5, 2, 2),
		sharpe: func(e int) float64 { return 1 / float64(e) },
		want:   "O0 C1 T1 S1 C2 T2 S2 K2 B2 C3 T3 S3 C4 T4 S4 K4 B4 C5 T5 S5 K5 B5 X",
	}, {
		name: "a new best is always checkpointed",
		cfg:  smallConfig(3, 10, 1),
		want: "O0 C1 T1 S1 K1 B1 C2 T2 S2 K2 B2 C3 T3 S3 K3 B3 X",
	}, {
		name:   "early stop after the patience, checkpointed",
		cfg:    patience(smallConfig(10, 5, 1), 2),
		sharpe: func(e int) float64 { return map[int]float64{1: 1.0, 2: 0.5, 3: 1.0}[e] },
		want:   "O0 C1 T1 S1 K1 B1 C2 T2 S2 B2 C3 T3 S3 K3 B3 X",
	}, {
		name: "a lost worker: reopened at the last checkpoint",
		cfg:  smallConfig(4, 2, 2),
		trainErr: func(e, n int) error {
			if e == 3 && n == 1 {
				return workflow.ErrSessionFailed
			}
			return nil
		},
		want: "O0 C1 T1 S1 C2 T2 S2 K2 B2 C3 T3 O2 C3 T3 S3 C4 T4 S4 K4 B4 X",
	}, {
		// The chunk of epochs 1-3 wrote checkpoints 1 and 2 (new bests) and
		// 3 (cadence) before its worker was lost in epoch 5: the run
		// reopens at 3 with the scores of epochs 1-3, and stops early at 5
		// (patience 3: epochs 3, 4, 5 below the best of epoch 2).
		name:   "a loss inside a chunk: reopened at the newest checkpoint it wrote",
		cfg:    patience(smallConfig(8, 3, 1), 3),
		sharpe: func(e int) float64 { return map[int]float64{1: 0.5, 2: 0.9, 3: 0.4, 4: 0.3, 5: 0.2}[e] },
		trainErr: func(e, n int) error {
			if e == 5 && n == 1 {
				return workflow.ErrSessionFailed
			}
			return nil
		},
		want: "O0 C1 T1 S1 K1 B1 C2 T2 S2 K2 B2 C3 T3 S3 K3 B3 C4 T4 S4 B4 C5 T5 O3 C4 T4 S4 B4 C5 T5 S5 K5 B5 X",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				seqs    [2]string
				epochs  [2][]int
				results [2]workflows.RunResult
				chunks  []activities.EpochsInput
			)
			for i, chunk := range []int{1, 3} {
				f := newFake()
				f.chunk, f.sharpe, f.trainErr = chunk, tc.sharpe, tc.trainErr
				env := newEnv(t, f, tc.opts)
				env.ExecuteWorkflow(workflows.TrainingRunName, tc.cfg)
				results[i], seqs[i], epochs[i] = result(t, env), f.sequence(), f.epochs
				chunks = f.chunks
			}
			if seqs[0] != tc.want {
				t.Errorf("in chunks of one:\n got %s\nwant %s", seqs[0], tc.want)
			}
			if seqs[1] != tc.want {
				t.Errorf("in chunks of three:\n got %s\nwant %s", seqs[1], tc.want)
			}
			if !slices.Equal(epochs[0], epochs[1]) {
				t.Errorf("epoch rows: %v in chunks of one, %v of three", epochs[0], epochs[1])
			}
			if !reflect.DeepEqual(results[0], results[1]) {
				t.Errorf("result in chunks of one %+v\n             of three %+v", results[0], results[1])
			}
			if len(chunks) == 0 || len(chunks) >= len(epochs[1]) {
				t.Errorf("%d RunEpochs calls for %d epochs", len(chunks), len(epochs[1]))
			}
			for i, c := range chunks {
				if c.Until != tc.cfg.Epochs || c.Budget != workflows.DefaultOptions().ChunkBudget {
					t.Errorf("chunk %d asked %+v: want the epochs up to %d within the default budget", i, c, tc.cfg.Epochs)
				}
			}
		})
	}
}

// TestChunkScoresContinueFromTheCommittedOnes checks that each chunk
// starts from the scores the workflow committed through the epoch before
// it, so that the chunk and the workflow agree on new bests and patience.
func TestChunkScoresContinueFromTheCommittedOnes(t *testing.T) {
	f := newFake()
	f.chunk = 2
	f.sharpe = func(e int) float64 { return map[int]float64{1: 0.3, 2: 0.9, 3: 0.5, 4: 0.4, 5: 0.2}[e] }
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(5, 5, 1))
	r := result(t, env)
	if len(f.chunks) != 3 {
		t.Fatalf("%d chunks, want 3 (epochs 1-2, 3-4, 5)", len(f.chunks))
	}
	if s := f.chunks[1].Scores; f.chunks[1].After != 2 || s.BestEpoch != 2 || s.BestValidSharpe != 0.9 || s.BestCheckpoint == nil || s.BestCheckpoint.Epoch != 2 {
		t.Errorf("second chunk starts after epoch %d from %+v: want best epoch 2 (0.9) with its checkpoint", f.chunks[1].After, s)
	}
	if s := f.chunks[2].Scores; s.SinceBest != 2 || s.LastEpoch != 4 || s.LastValidSharpe != 0.4 {
		t.Errorf("third chunk starts from %+v: want 2 backtests since the best, the last at epoch 4", s)
	}
	if r.BestEpoch != 2 || r.BestCheckpoint.Epoch != 2 || r.LastCheckpoint.Epoch != 5 {
		t.Errorf("result %+v: want best epoch 2, last checkpoint 5", r)
	}
}

// TestSignalsAreTakenAtTheEndOfTheChunk: a pause or a stop that arrives
// during a chunk takes effect when it returns; the epoch it ends with is
// checkpointed and backtested with the per-stage activities, as the
// per-stage path does at a pause or stop.
func TestSignalsAreTakenAtTheEndOfTheChunk(t *testing.T) {
	t.Run("pause", func(t *testing.T) {
		f := newFake()
		f.chunk = 2
		env := newEnv(t, f, workflows.Options{})
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.PauseSignal, nil) }, trainTime/2)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ResumeSignal, nil) }, 3*time.Hour)
		env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(5, 10, 10))
		r := result(t, env)
		if want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 X O2 C3 T3 S3 C4 T4 S4 C5 T5 S5 K5 B5 X"; f.sequence() != want {
			t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
		}
		if !slices.Equal(f.statuses, []metadata.Status{metadata.StatusPaused, metadata.StatusRunning, metadata.StatusCompleted}) {
			t.Errorf("statuses %v, want paused, running, completed", f.statuses)
		}
		if r.Epochs != 5 || r.Status != metadata.StatusCompleted {
			t.Errorf("result %+v, want completed after 5 epochs", r)
		}
	})
	t.Run("stop", func(t *testing.T) {
		f := newFake()
		f.chunk = 2
		env := newEnv(t, f, workflows.Options{})
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.StopSignal, nil) }, trainTime/2)
		env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(10, 5, 5))
		r := result(t, env)
		if want := "O0 C1 T1 S1 C2 T2 S2 K2 B2 X"; f.sequence() != want {
			t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
		}
		if r.Status != metadata.StatusStopped || r.Epochs != 2 || r.LastCheckpoint.Epoch != 2 {
			t.Errorf("result %+v: want stopped after epoch 2 with its checkpoint", r)
		}
	})
}

// TestChunksStopAtTheContinueAsNewCadence: a chunk never trains past the
// epoch where the run continues as new, and that epoch is checkpointed
// before the Continue-As-New even when its cadence did not ask for it.
func TestChunksStopAtTheContinueAsNewCadence(t *testing.T) {
	f := newFake()
	f.chunk = 10
	f.sharpe = func(e int) float64 { return 1 / float64(e) } // best at epoch 1: no forced checkpoint later
	cfg := smallConfig(5, 3, 1)
	var state *workflows.RunState
	for runs := 1; ; runs++ {
		env := newEnv(t, f, workflows.Options{ContinueAsNewEvery: 2})
		env.ExecuteWorkflow(workflows.TrainingRunName, cfg, state)
		var can *workflow.ContinueAsNewError
		if !errors.As(env.GetWorkflowError(), &can) {
			if r := result(t, env); r.Epochs != 5 || runs != 3 {
				t.Fatalf("ended after %d workflow runs with %+v, want 3 runs and 5 epochs", runs, r)
			}
			break
		}
		next := continuedState(t, env)
		if next.Epoch != 2*runs || next.LastCheckpoint == nil || next.LastCheckpoint.Epoch != 2*runs {
			t.Fatalf("continue-as-new %d at epoch %d with checkpoint %+v, want epoch %d checkpointed", runs, next.Epoch, next.LastCheckpoint, 2*runs)
		}
		state = &next
	}
	if want := "O0 C1 T1 S1 K1 B1 C2 T2 S2 K2 B2 H O2 C3 T3 S3 K3 B3 C4 T4 S4 K4 B4 H O4 C5 T5 S5 K5 B5 X"; f.sequence() != want {
		t.Errorf("activities:\n got %s\nwant %s", f.sequence(), want)
	}
	for _, c := range f.chunks {
		if c.Until != min(c.After+2, 5) {
			t.Errorf("chunk after epoch %d asked up to %d, want %d", c.After, c.Until, min(c.After+2, 5))
		}
	}
}

// TestResumeAtTheContinueAsNewEpochTrainsOneMore: a run paused at the
// epoch where it was to continue as new trains one epoch after the resume
// and continues as new after it, whether its chunks train one epoch or
// all up to the Continue-As-New.
func TestResumeAtTheContinueAsNewEpochTrainsOneMore(t *testing.T) {
	var seqs [2]string
	// The pause arrives in epoch 2: in its chunk of one epoch, or in the
	// chunk of epochs 1-2 (a mocked RunEpochs takes trainTime).
	for i, chunk := range []int{1, 10} {
		f := newFake()
		f.chunk = chunk
		env := newEnv(t, f, workflows.Options{ContinueAsNewEvery: 2})
		at := trainTime + trainTime/2
		if chunk > 1 {
			at = trainTime / 2
		}
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.PauseSignal, nil) }, at)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ResumeSignal, nil) }, 3*time.Hour)
		env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(6, 10, 10))
		if next := continuedState(t, env); next.Epoch != 3 || next.LastCheckpoint == nil || next.LastCheckpoint.Epoch != 3 {
			t.Errorf("chunk %d: continued at epoch %d with checkpoint %+v, want 3", chunk, next.Epoch, next.LastCheckpoint)
		}
		seqs[i] = f.sequence()
	}
	if seqs[0] != seqs[1] {
		t.Errorf("in chunks of one: %s\nin chunks of ten: %s", seqs[0], seqs[1])
	}
}

// TestNonFiniteInAChunkNamesTheCheckpointItWrote: a chunk that diverges
// after writing checkpoints fails the run with an error that names the
// newest of them as the last good one.
func TestNonFiniteInAChunkNamesTheCheckpointItWrote(t *testing.T) {
	f := newFake()
	f.chunk = 10
	f.trainErr = failEpoch(3, "loss is NaN", activities.ErrTypeNonFinite)
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(10, 1, 1))
	if err := env.GetWorkflowError(); !activities.IsFatal(err) {
		t.Fatalf("run ended with %v; want the non-finite failure", err)
	}
	if n := len(f.statusErrs); n == 0 || f.statuses[n-1] != metadata.StatusFailed ||
		!strings.Contains(f.statusErrs[n-1], "the last good checkpoint is epoch 2") || !strings.Contains(f.statusErrs[n-1], ckRef(2).URI) {
		t.Fatalf("recorded statuses %v, errors %q; want failed, naming the epoch 2 checkpoint", f.statuses, f.statusErrs)
	}
	if strings.Contains(f.sequence(), "O2") {
		t.Errorf("activities %s: a deterministic failure must not reopen the trainer", f.sequence())
	}
}

// TestFailedRunRecordsCleanBoundedErrorText: a run that fails with an
// error of a megabyte with NULs and invalid UTF-8 (what a data file may
// make an error quote) asks SetRunStatus to record it as errtext.Clean
// makes it, so that the activity's input in the history is bounded and
// its JSON keeps every byte as an escape.
func TestFailedRunRecordsCleanBoundedErrorText(t *testing.T) {
	f := newFake()
	f.chunk = 10
	bad := "header: " + strings.Repeat("\xff\xfed\x00", 1<<18)
	f.trainErr = failEpoch(2, bad, activities.ErrTypeBadData)
	env := newEnv(t, f, workflows.Options{})
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(10, 1, 1))
	if err := env.GetWorkflowError(); !activities.IsFatal(err) {
		t.Fatalf("run ended with %v; want the BadData failure", err)
	}
	n := len(f.statusErrs)
	if n == 0 || f.statuses[n-1] != metadata.StatusFailed {
		t.Fatalf("recorded statuses %v; want failed last", f.statuses)
	}
	got := f.statusErrs[n-1]
	if got != errtext.Clean(got) || len(got) > errtext.Limit || !strings.Contains(got, `header: \xff\xfed\x00`) || !strings.Contains(got, " bytes cut) ... ") {
		t.Errorf("recorded error of %d bytes: %.120q…; want errtext.Clean's, at most %d bytes, with the bytes as escapes and the cut said", len(got), got, errtext.Limit)
	}
}
