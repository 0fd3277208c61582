package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/workflows"
)

// Environment variables of TestTrainingRunOnRealActivitiesResumesBitIdentically.
// The test runs in `make test` on the CPU; a device visit runs the same
// compiled test (bin/gputest/workflows.test, `make gpu-binaries`) with
// DQNFLOW_TEST_DEVICE=cuda.
const (
	envTestDevice    = "DQNFLOW_TEST_DEVICE"    // backend.Open's device; default "cpu"
	envTestPrecision = "DQNFLOW_TEST_PRECISION" // the run's precision; default the config's (fp32)
)

// TestTrainingRunOnRealActivitiesResumesBitIdentically runs the
// TrainingRun workflow for three epochs with the real session and control
// activities: a trainer of the backend for $DQNFLOW_TEST_DEVICE, the
// worker's registry, checkpoint files and the in-memory store, in the
// SDK's test environment (no Temporal server, no PostgreSQL). Once it runs
// without interruption. Once the worker loses the trainer after epoch 2
// (it is closed before epoch 3's Collect, as when the worker process
// died): the workflow must reopen it from the epoch-2 checkpoint, and its
// final checkpoint must equal the uninterrupted run's, every tensor bit for
// bit (weights, optimiser moments, replay buffer, environments, random
// streams).
func TestTrainingRunOnRealActivitiesResumesBitIdentically(t *testing.T) {
	b, device := testBackend(t)
	cfg := trainertest.SmallConfig()
	cfg.Device = device
	if p := os.Getenv(envTestPrecision); p != "" {
		cfg.Precision = p
	}
	cfg.Epochs, cfg.StepsPerEpoch = 3, 8
	cfg.Checkpoint.Every, cfg.Backtest.Every = 1, 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	whole := runOnRealActivities(t, b, prices.Source{}, cfg, false)
	resumed := runOnRealActivities(t, b, prices.Source{}, cfg, true)
	checkResumedBitIdentically(t, cfg, whole, resumed)
}

// TestTrainingRunRecordsItsRecommendationInTheBestCheckpoint: a
// TrainingRun on the real activities ends by writing into its best
// checkpoint what "dqnflow train" writes into its own
// (checkpoint.SetRecommendation): the best epoch's validation Sharpe,
// its t-statistic from the validation backtest the run recorded,
// backtest.min_valid_t and the verdict, flat when t falls short of it
// (a gate of 100, which no three-epoch run reaches) and trade with the
// gate off. The rewritten blob verifies against the ref the run returns and the row
// the store holds, which stays the run's best; no other checkpoint
// carries a recommendation.
func TestTrainingRunRecordsItsRecommendationInTheBestCheckpoint(t *testing.T) {
	b, device := testBackend(t)
	for _, c := range []struct {
		minValidT float64
		want      string
	}{{100, checkpoint.RecommendFlat}, {0, checkpoint.RecommendTrade}} {
		cfg := trainertest.SmallConfig()
		cfg.Device = device
		cfg.Epochs, cfg.StepsPerEpoch = 3, 8
		cfg.Checkpoint.Every, cfg.Backtest.Every, cfg.Backtest.MinValidT = 1, 1, c.minValidT
		cfg.Checkpoint.Dir = t.TempDir()
		wf := &workflows.Workflows{Options: workflows.Options{ChunkBudget: time.Nanosecond}}
		env, tr, _ := realEnv(t, b, wf, cfg.Checkpoint.Dir)
		env.SetTestTimeout(5 * time.Minute)
		env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
		res := result(t, env)
		best := res.BestCheckpoint
		if best == nil || res.Recommendation == nil {
			t.Fatalf("min_valid_t %g: best checkpoint %+v, recommendation %+v; want both", c.minValidT, best, res.Recommendation)
		}
		ck, _, err := checkpoint.ReadVerified(context.Background(), best.URI, best.SHA256, checkpoint.Options{})
		if err != nil {
			t.Fatalf("the best checkpoint does not verify against the run's ref: %v", err)
		}
		got, ok, err := checkpoint.ReadRecommendation(ck.Meta)
		if err != nil || !ok || got != *res.Recommendation || got.Recommendation != c.want || got.MinValidT != c.minValidT {
			t.Errorf("min_valid_t %g: the best checkpoint records %+v (ok %v, %v), the run returned %+v; want %s", c.minValidT, got, ok, err, *res.Recommendation, c.want)
		}
		st := tr.Store.(activities.Store)
		bts, err := st.ListBacktests(context.Background(), res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, bt := range bts {
			if bt.Epoch != best.Epoch || bt.Split != "valid" {
				continue
			}
			found = true
			var rep sim.Report
			if err := json.Unmarshal(bt.Report, &rep); err != nil {
				t.Fatal(err)
			}
			// t = Sharpe·√((bars−1)/bars a year), sim.Report.SharpeT.
			wantT := rep.Sharpe * math.Sqrt(float64(rep.Bars-1)/rep.BarsPerYear)
			if got.ValidSharpe != res.BestValidSharpe || math.Abs(got.ValidT-wantT) > 1e-12*math.Max(1, math.Abs(wantT)) {
				t.Errorf("recorded Sharpe %v, t %v; want the best's %v and t %v", got.ValidSharpe, got.ValidT, res.BestValidSharpe, wantT)
			}
		}
		if !found {
			t.Errorf("the store holds no validation backtest of the best epoch %d", best.Epoch)
		}
		rows, err := st.ListCheckpoints(context.Background(), res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Epoch == best.Epoch && (r.SHA256 != best.SHA256 || !r.IsBest) {
				t.Errorf("the store's row of the best checkpoint: sha %s, best %v; want the rewritten blob's %s, still the best", r.SHA256, r.IsBest, best.SHA256)
			}
			if r.Epoch == best.Epoch || r.Pruned {
				continue
			}
			other, _, err := checkpoint.ReadVerified(context.Background(), r.URI, r.SHA256, checkpoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := checkpoint.ReadRecommendation(other.Meta); ok {
				t.Errorf("checkpoint of epoch %d, not the best (%d), carries a recommendation", r.Epoch, best.Epoch)
			}
		}
	}
}

// checkResumedBitIdentically checks that the run that lost its trainer
// before the last epoch restored it from the checkpoint before, and ended
// with the same final checkpoint as the run that lost nothing.
func checkResumedBitIdentically(t *testing.T, cfg config.RunConfig, whole, resumed realRun) {
	t.Helper()

	if len(whole.opens) != 1 || whole.opens[0].Restored {
		t.Fatalf("without the loss the trainer was opened as %+v; want one new trainer", whole.opens)
	}
	if len(resumed.opens) != 2 || resumed.opens[0].Restored || !resumed.opens[1].Restored || resumed.opens[1].Epoch != 2 {
		t.Fatalf("with the loss the trainer was opened as %+v; want a new trainer, then one restored from the epoch-2 checkpoint", resumed.opens)
	}
	for _, r := range []realRun{whole, resumed} {
		if r.res.Epochs != cfg.Epochs || r.res.LastCheckpoint == nil || r.res.LastCheckpoint.Epoch != cfg.Epochs {
			t.Fatalf("run ended after %d epochs with last checkpoint %+v; want %d epochs and a checkpoint of the last", r.res.Epochs, r.res.LastCheckpoint, cfg.Epochs)
		}
		if r.res.Info.Backend == "" || r.res.Info.Device == "" {
			t.Errorf("the run does not record what it ran on: %+v", r.res.Info)
		}
	}
	a, _, err := checkpoint.ReadVerified(context.Background(), whole.res.LastCheckpoint.URI, whole.res.LastCheckpoint.SHA256, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := checkpoint.ReadVerified(context.Background(), resumed.res.LastCheckpoint.URI, resumed.res.LastCheckpoint.SHA256, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Meta[checkpoint.MetaDevice]; got != resumed.res.Info.Device {
		t.Errorf("the final checkpoint says device %q, the run %q", got, resumed.res.Info.Device)
	}
	if len(a.Tensors) != len(c.Tensors) {
		t.Fatalf("final checkpoint: %d tensors after the restore, %d without", len(c.Tensors), len(a.Tensors))
	}
	for i, x := range a.Tensors {
		y := c.Tensors[i]
		if x.Name != y.Name || x.DType != y.DType || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("tensor %s differs between the resumed and the uninterrupted run", x.Name)
		}
	}
	t.Logf("%s %s: 3 epochs, global step %d, %d tensors equal bit for bit after a restore from epoch 2; %.1f s and %.1f s",
		resumed.res.Info.Device, resumed.res.Info.Precision, resumed.res.GlobalStep, len(a.Tensors), whole.took.Seconds(), resumed.took.Seconds())
}

// realRun is what one TrainingRun on real activities ended with.
type realRun struct {
	res   workflows.RunResult
	opens []activities.OpenOutput // each OpenTrainer's result, in order
	took  time.Duration
}

// runOnRealActivities runs TrainingRun with cfg to its end in a test
// environment whose activities are the real ones on backend b. With lose,
// the worker loses the run's trainer just before the chunk of the last
// epoch. The run trains in RunEpochs chunks of one epoch each (a budget
// of 1 ns).
func runOnRealActivities(t *testing.T, b trainer.Backend, src prices.Source, cfg config.RunConfig, lose bool) realRun {
	t.Helper()
	cfg.Checkpoint.Dir = t.TempDir()
	wf := &workflows.Workflows{Options: workflows.Options{ChunkBudget: time.Nanosecond}}
	env, tr, reg := realEnv(t, b, wf, cfg.Checkpoint.Dir)
	tr.Data = src
	env.SetTestTimeout(5 * time.Minute)

	var (
		mu    sync.Mutex
		opens []activities.OpenOutput
		lost  bool
	)
	env.SetOnActivityCompletedListener(func(info *activity.Info, result converter.EncodedValue, err error) {
		if info.ActivityType.Name != "OpenTrainer" || err != nil {
			return
		}
		var out activities.OpenOutput
		if result.Get(&out) == nil {
			mu.Lock()
			opens = append(opens, out)
			mu.Unlock()
		}
	})
	loseBefore := func(runID string, e int) {
		mu.Lock()
		loseNow := lose && !lost && e == cfg.Epochs
		lost = lost || loseNow
		mu.Unlock()
		if loseNow && !reg.CloseRun(runID, "the test loses the worker") {
			t.Errorf("run %s: no idle trainer to lose before epoch %d", runID, e)
		}
	}
	env.OnActivity(tr.RunEpochs, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.EpochsInput) (activities.EpochsOutput, error) {
			loseBefore(in.RunID, in.After+1)
			return tr.RunEpochs(ctx, in)
		})

	start := time.Now()
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	took := time.Since(start)
	res := result(t, env)
	if lose && !lost {
		t.Fatal("the test never lost the trainer")
	}
	mu.Lock()
	defer mu.Unlock()
	return realRun{res: res, opens: append([]activities.OpenOutput(nil), opens...), took: took}
}

// realEnv is the SDK's test environment for workflow wf with the real
// session and control activities on backend b: the worker's registry
// (closed with the test), checkpoint files under dir and an SQLite store.
func realEnv(tb testing.TB, b trainer.Backend, wf *workflows.Workflows, dir string) (*testsuite.TestWorkflowEnvironment, *activities.Trainer, *worker.Registry) {
	tb.Helper()
	st := activitiestest.NewStore(tb)
	reg := worker.NewRegistry(0, nil)
	tb.Cleanup(func() { reg.Close(context.Background()) })
	tr := &activities.Trainer{Backend: b, Registry: reg, Store: st, Checkpoints: checkpoint.Local(dir), HeartbeatInterval: time.Second}
	env := sessionEnv()
	env.RegisterWorkflowWithOptions(wf.TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
	env.RegisterActivity(tr)
	env.RegisterActivity(&activities.Control{Store: st, Checkpoints: checkpoint.Local(dir)})
	return env, tr, reg
}

// testBackend opens the backend for $DQNFLOW_TEST_DEVICE (default cpu)
// and returns it with that device.
func testBackend(tb testing.TB) (trainer.Backend, string) {
	tb.Helper()
	device := os.Getenv(envTestDevice)
	if device == "" {
		device = "cpu"
	}
	tu, err := gpu.TuningFromEnv()
	if err != nil {
		tb.Fatal(err)
	}
	b, desc, err := backend.Open(device, tu)
	if err != nil {
		tb.Fatalf("%s=%s: %v", envTestDevice, device, err)
	}
	tb.Logf("backend: %s", desc.Summary)
	return b, device
}

// TestTrainingRunOnAPanelResumesBitIdentically: a TrainingRun whose
// config names data.series (two H4 forex slices inside the worker's data
// roots) trains its panel on the real activities; losing the trainer
// before the last epoch restores it from the checkpoint before (the
// panel prepared again and held against the checkpoint's record), and
// the final checkpoint equals the uninterrupted run's bit for bit, and
// records the panel.
func TestTrainingRunOnAPanelResumesBitIdentically(t *testing.T) {
	b, device := testBackend(t)
	dir, _ := filepath.Abs("../walkforward/testdata")
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}
	cfg := trainertest.SmallConfig()
	cfg.Device = device
	cfg.Data.Path, cfg.Data.Series = "", filepath.Join(dir, "EURUSD_H4.csv")+","+filepath.Join(dir, "USDJPY_H4.csv")
	cfg.Epochs, cfg.StepsPerEpoch = 3, 8
	cfg.Checkpoint.Every, cfg.Backtest.Every = 1, 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	whole := runOnRealActivities(t, b, src, cfg, false)
	resumed := runOnRealActivities(t, b, src, cfg, true)
	checkResumedBitIdentically(t, cfg, whole, resumed)
	ck, _, err := checkpoint.ReadVerified(context.Background(), resumed.res.LastCheckpoint.URI, resumed.res.LastCheckpoint.SHA256, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := market.ParsePanelMeta(ck.Meta[checkpoint.MetaPanel])
	if err != nil || len(recs) != 2 || recs[0].Series != "EURUSD_H4" || recs[1].Series != "USDJPY_H4" || recs[0].SHA256 == "" {
		t.Errorf("final checkpoint's panel %+v (%v); want EURUSD_H4 and USDJPY_H4 with their digests", recs, err)
	}
}
