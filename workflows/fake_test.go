package workflows_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/epochloop"
	"github.com/dqnflow/dqnflow/workflows"
)

var (
	ta *activities.Trainer
	ca *activities.Control
)

// trainTime is how long a mocked RunEpochs chunk takes on the test clock,
// so that signals can be placed inside a chunk: with one epoch a chunk,
// epoch e trains during [(e−1)·trainTime, e·trainTime).
const trainTime = 10 * time.Minute

// fakeGPU stands in for every activity. Session activities are recorded in
// order in calls ("C3" collect, "T3" train, "S3" sync, "K3" checkpoint, "B3"
// backtest, "O2" open at epoch 2, "H" hold the slot, "X" close); control activities, which may
// run concurrently, in their own lists.
type fakeGPU struct {
	mu sync.Mutex
	// sharpe is the validation Sharpe at an epoch; nil means rising.
	sharpe func(epoch int) float64
	// trainErr, if set, may fail the n-th training of an epoch (n from 1).
	trainErr func(epoch, n int) error
	// storeRunID, if set, is the run id RecordRun answers (the store's key
	// for a run under a reused workflow id).
	storeRunID string
	// trainTime is how long a RunEpochs call takes on the test clock; zero
	// means the package's trainTime.
	trainTime time.Duration
	// checkpointTime and backtestTime are how long a Checkpoint and a
	// Backtest take on the test clock (zero: no time), so that a signal can
	// be placed inside them.
	checkpointTime, backtestTime time.Duration

	// chunk is how many epochs a RunEpochs call trains at most (its
	// budget, counted in epochs); newEnv makes 0 one.
	chunk int
	// chunks are the RunEpochs calls.
	chunks []activities.EpochsInput

	// ckRows and btRows are the checkpoints and validation Sharpes that
	// RunEpochs recorded, by epoch (ChunkLeftovers reads them).
	ckRows map[int]activities.CheckpointRef
	btRows map[int]float64

	calls      []string
	runIDs     map[string]bool // run ids the trainer activities were given
	trainCalls map[int]int
	opens      []activities.OpenInput
	recorded   []activities.RecordRunInput
	epochs     []int
	retentions []activities.RetentionInput
	statuses   []metadata.Status
	statusErrs []string // SetRunStatus's error texts, beside statuses
	devices    int
	// recommended are the epochs of the checkpoints RecordRecommendation
	// was asked to write a recommendation into.
	recommended []int
}

func newFake() *fakeGPU {
	return &fakeGPU{trainCalls: map[int]int{}, runIDs: map[string]bool{}, ckRows: map[int]activities.CheckpointRef{}, btRows: map[int]float64{}}
}

func (f *fakeGPU) used(runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runIDs[runID] = true
}

func (f *fakeGPU) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

// sequence is the session calls, space separated. A checkpoint and a
// backtest of the same epoch may run in either order (the workflow
// schedules them together when both are due), so such a pair is written
// checkpoint first.
func (f *fakeGPU) sequence() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls := append([]string(nil), f.calls...)
	for i := 0; i+1 < len(calls); i++ {
		if a, b := calls[i], calls[i+1]; a[0] == 'B' && b[0] == 'K' && a[1:] == b[1:] {
			calls[i], calls[i+1] = b, a
		}
	}
	return strings.Join(calls, " ")
}

func ckRef(e int) activities.CheckpointRef {
	return activities.CheckpointRef{RunID: "run", URI: fmt.Sprintf("/ck/epoch-%06d", e), SHA256: fmt.Sprintf("%064d", e), Epoch: e, GlobalStep: int64(10 * e)}
}

func (f *fakeGPU) register(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(ta.OpenTrainer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.OpenInput) (activities.OpenOutput, error) {
			f.used(in.RunID)
			f.mu.Lock()
			f.opens = append(f.opens, in)
			f.mu.Unlock()
			out := activities.OpenOutput{Info: trainer.Info{Backend: "fake", Device: "fake", Precision: "fp32"}}
			if in.Resume != nil {
				out.Epoch, out.GlobalStep, out.Restored = in.Resume.Epoch, in.Resume.GlobalStep, true
			}
			f.add(fmt.Sprintf("O%d", out.Epoch))
			return out, nil
		})
	tt := f.trainTime
	if tt == 0 {
		tt = trainTime
	}
	env.OnActivity(ta.RunEpochs, mock.Anything, mock.Anything).After(tt).Return(f.runEpochs)
	env.OnActivity(ta.Checkpoint, mock.Anything, mock.Anything).After(f.checkpointTime).Return(
		func(_ context.Context, in activities.CheckpointInput) (activities.CheckpointOutput, error) {
			f.used(in.RunID)
			f.add(fmt.Sprintf("K%d", in.Epoch))
			return activities.CheckpointOutput{Checkpoint: ckRef(in.Epoch)}, nil
		})
	env.OnActivity(ta.Backtest, mock.Anything, mock.Anything).After(f.backtestTime).Return(
		func(_ context.Context, in activities.BacktestInput) (activities.BacktestOutput, error) {
			f.add(fmt.Sprintf("B%d", in.Epoch))
			s := float64(in.Epoch) / 10
			if f.sharpe != nil {
				s = f.sharpe(in.Epoch)
			}
			var rep sim.Report
			rep.Sharpe = s
			return activities.BacktestOutput{Epoch: in.Epoch, Report: rep}, nil
		})
	env.OnActivity(ta.HoldSlot, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.HoldInput) (activities.HoldOutput, error) {
			f.used(in.RunID)
			f.add("H")
			return activities.HoldOutput{Held: true}, nil
		})
	env.OnActivity(ta.CloseTrainer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CloseInput) (activities.CloseOutput, error) {
			f.add("X")
			return activities.CloseOutput{Closed: true}, nil
		})
	env.OnActivity(ca.RecordRecommendation, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecommendInput) (activities.RecommendOutput, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.recommended = append(f.recommended, in.Checkpoint.Epoch)
			ck := in.Checkpoint
			ck.SHA256 = "recommended"
			return activities.RecommendOutput{Checkpoint: ck, Recommendation: checkpoint.NewRecommendation(0.5, 1, in.MinValidT, false)}, nil
		})
	env.OnActivity(ca.RecordRun, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecordRunInput) (activities.RecordRunOutput, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.recorded = append(f.recorded, in)
			id := in.RunID
			if f.storeRunID != "" {
				id = f.storeRunID
			}
			lineage := in.Lineage
			if lineage == "" {
				lineage = id
			}
			return activities.RecordRunOutput{RunID: id, Lineage: lineage}, nil
		})
	env.OnActivity(ca.SetRunStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SetStatusInput) (activities.SetStatusOutput, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.statuses = append(f.statuses, in.Status)
			f.statusErrs = append(f.statusErrs, in.Error)
			return activities.SetStatusOutput{}, nil
		})
	env.OnActivity(ca.SetRunDevice, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SetDeviceInput) (activities.SetDeviceOutput, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.devices++
			return activities.SetDeviceOutput{}, nil
		})
	env.OnActivity(ca.ChunkLeftovers, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.LeftoversInput) (activities.LeftoversOutput, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			var out activities.LeftoversOutput
			for e := in.After + 1; e <= in.Until; e++ {
				if ck, ok := f.ckRows[e]; ok {
					out.Checkpoints = append(out.Checkpoints, ck)
				}
				if s, ok := f.btRows[e]; ok {
					out.Sharpes = append(out.Sharpes, activities.EpochSharpe{Epoch: e, Sharpe: s})
				}
			}
			return out, nil
		})
	env.OnActivity(ca.ApplyRetention, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RetentionInput) (activities.RetentionOutput, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.retentions = append(f.retentions, in)
			return activities.RetentionOutput{}, nil
		})
}

// runEpochs stands in for RunEpochs: up to f.chunk epochs from in.After+1,
// each recorded as the per-stage activities record theirs (collect,
// train, sync, epoch row, then the backtest and the checkpoint that
// epochloop.Due and activities.Scores ask for), with the config of the
// last OpenTrainer. A trainErr fails the whole chunk, as a lost worker
// does.
func (f *fakeGPU) runEpochs(_ context.Context, in activities.EpochsInput) (activities.EpochsOutput, error) {
	f.used(in.RunID)
	f.mu.Lock()
	f.chunks = append(f.chunks, in)
	cfg := f.opens[len(f.opens)-1].Config
	f.mu.Unlock()
	out := activities.EpochsOutput{Scores: in.Scores}
	for e := in.After + 1; e <= in.Until && len(out.Epochs) < f.chunk && !out.Early; e++ {
		f.add(fmt.Sprintf("C%d", e))
		f.add(fmt.Sprintf("T%d", e))
		f.mu.Lock()
		f.trainCalls[e]++
		n := f.trainCalls[e]
		f.mu.Unlock()
		if f.trainErr != nil {
			if err := f.trainErr(e, n); err != nil {
				return activities.EpochsOutput{}, err
			}
		}
		f.add(fmt.Sprintf("S%d", e))
		res := activities.EpochResult{
			Epoch: e, Collect: trainer.CollectStats{EnvSteps: int64(100 * e)},
			Train: trainer.TrainStats{Steps: 10, GlobalStep: int64(10 * e), Loss: 1 / float64(e)},
		}
		f.mu.Lock()
		f.epochs = append(f.epochs, e)
		f.mu.Unlock()
		ck, bt := epochloop.Due(cfg, e)
		if bt {
			f.add(fmt.Sprintf("B%d", e))
			s := float64(e) / 10
			if f.sharpe != nil {
				s = f.sharpe(e)
			}
			res.ValidSharpe = &s
			f.mu.Lock()
			f.btRows[e] = s
			f.mu.Unlock()
			out.Scores, out.Early = out.Scores.Add(e, s, cfg.Backtest.Patience)
			ck = ck || out.Scores.MustCheckpoint(e, out.Early)
		}
		if ck {
			f.add(fmt.Sprintf("K%d", e))
			ref := ckRef(e)
			res.Checkpoint = &ref
			f.mu.Lock()
			f.ckRows[e] = ref
			f.mu.Unlock()
			if out.Scores.BestEpoch == e {
				out.Scores.BestCheckpoint = &ref
			}
		}
		out.Epochs = append(out.Epochs, res)
	}
	return out, nil
}

// newEnv returns a test environment with sessions enabled, the workflows
// registered with options o and every activity mocked by f. Unless
// f.chunk is set, each RunEpochs chunk trains one epoch.
func newEnv(t *testing.T, f *fakeGPU, o workflows.Options) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := sessionEnv()
	env.SetTestTimeout(30 * time.Second)
	wf := &workflows.Workflows{Options: o}
	env.RegisterWorkflowWithOptions(wf.TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
	env.RegisterWorkflowWithOptions(wf.Retrain, workflow.RegisterOptions{Name: workflows.RetrainName})
	env.RegisterWorkflowWithOptions(wf.Sweep, workflow.RegisterOptions{Name: workflows.SweepName})
	if f != nil {
		if f.chunk == 0 {
			f.chunk = 1
		}
		f.register(env)
	}
	return env
}

// smallConfig is a valid config with the given epochs and cadences.
func smallConfig(epochs, ckEvery, btEvery int) config.RunConfig {
	c := config.Defaults()
	c.Epochs, c.Checkpoint.Every, c.Backtest.Every = epochs, ckEvery, btEvery
	return c
}

// result runs to the end and returns the RunResult, failing on an error.
func result(t testing.TB, env *testsuite.TestWorkflowEnvironment) workflows.RunResult {
	t.Helper()
	return completed[workflows.RunResult](t, env)
}

// completed returns the result of env's workflow, failing unless it
// completed without an error.
func completed[R any](t testing.TB, env *testsuite.TestWorkflowEnvironment) R {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	var r R
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// sessionEnv is a test environment that runs sessions and logs nothing.
func sessionEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{EnableSessionWorker: true})
	return env
}

// failEpoch is a fakeGPU.trainErr that fails every training of epoch
// with a non-retryable error of errType saying msg.
func failEpoch(epoch int, msg, errType string) func(e, n int) error {
	return func(e, n int) error {
		if e == epoch {
			return temporal.NewNonRetryableApplicationError(msg, errType, nil)
		}
		return nil
	}
}
