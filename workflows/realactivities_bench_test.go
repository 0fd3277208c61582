package workflows_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/workflows"
)

// envBenchEpochs sets the epochs of BenchmarkTrainingRunOnRealActivities
// (default 40).
const envBenchEpochs = "DQNFLOW_BENCH_EPOCHS"

// BenchmarkTrainingRunOnRealActivities times what a user's run costs per
// epoch, not what one kernel costs: the TrainingRun workflow with the
// default config (batch 256, 300 steps, a validation backtest every
// epoch) on the real activities of the backend $DQNFLOW_TEST_DEVICE in
// $DQNFLOW_TEST_PRECISION, with checkpoint files on the local disk and the
// SQLite store, in the SDK's test environment (no server round trips).
// Early stopping is off, so every run trains all its epochs.
//
//   - "checkpoint every epoch" is the default cadence: each epoch also
//     snapshots the trainer (weights, optimiser, the replay buffer) and
//     writes, fsyncs and records its checkpoint;
//   - "checkpoint at the end" writes only the last epoch's.
//
// Metrics: chunk-ms/epoch is the wall time inside the RunEpochs chunks
// over the epochs they trained (the pace of the GPU worker);
// run-ms/epoch is the whole workflow's wall time over the epochs (opening
// the trainer, the warm-up collection and the final test-range report
// included); train-ms/epoch is the epochs' own collect and train time.
//
// On a GPU machine (tools/device/visit.sh part runbench):
//
//	DQNFLOW_TEST_DEVICE=cuda DQNFLOW_TEST_PRECISION=bf16-mixed \
//	  workflows.test -test.run '^$' -test.bench TrainingRunOnRealActivities -test.benchtime 1x
func BenchmarkTrainingRunOnRealActivities(b *testing.B) {
	be, device := testBackend(b)
	epochs := 40
	if s := os.Getenv(envBenchEpochs); s != "" {
		var err error
		if epochs, err = strconv.Atoi(s); err != nil || epochs < 2 {
			b.Fatalf("%s=%q: want a number of epochs of at least 2", envBenchEpochs, s)
		}
	}
	cfg := config.Defaults()
	cfg.Device = device
	if p := os.Getenv(envTestPrecision); p != "" {
		cfg.Precision = p
	}
	cfg.Epochs = epochs
	cfg.Backtest.Patience = 0
	for _, c := range []struct {
		name  string
		every int
	}{{"checkpoint every epoch", 1}, {"checkpoint at the end", epochs}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := cfg
			cfg.Checkpoint.Every = c.every
			if err := cfg.Validate(); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				benchRun(b, be, cfg)
			}
		})
	}
}

// benchRun runs one TrainingRun of cfg on the real activities of backend
// be and reports its per-epoch times.
func benchRun(b *testing.B, be trainer.Backend, cfg config.RunConfig) {
	b.Helper()
	cfg.Checkpoint.Dir = b.TempDir()
	env, tr, _ := realEnv(b, be, &workflows.Workflows{}, cfg.Checkpoint.Dir)
	env.SetTestTimeout(10 * time.Minute)

	var (
		mu      sync.Mutex
		inChunk time.Duration
		trained int
		trainMS int64
	)
	env.OnActivity(tr.RunEpochs, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.EpochsInput) (activities.EpochsOutput, error) {
			t0 := time.Now()
			out, err := tr.RunEpochs(ctx, in)
			mu.Lock()
			defer mu.Unlock()
			inChunk += time.Since(t0)
			trained += len(out.Epochs)
			for _, e := range out.Epochs {
				trainMS += e.DurationMS
			}
			return out, err
		})

	b.ResetTimer()
	start := time.Now()
	env.ExecuteWorkflow(workflows.TrainingRunName, cfg)
	took := time.Since(start)
	b.StopTimer()
	res := result(b, env)
	mu.Lock()
	defer mu.Unlock()
	if res.Epochs != cfg.Epochs || trained != cfg.Epochs {
		b.Fatalf("the run ended after %d epochs, its chunks trained %d; want %d", res.Epochs, trained, cfg.Epochs)
	}
	b.ReportMetric(float64(inChunk.Microseconds())/1e3/float64(trained), "chunk-ms/epoch")
	b.ReportMetric(float64(took.Microseconds())/1e3/float64(cfg.Epochs), "run-ms/epoch")
	b.ReportMetric(float64(trainMS)/float64(trained), "train-ms/epoch")
	b.Logf("%s %s, checkpoint.every %d: %d epochs in %.2f s, %.2f s inside chunks",
		res.Info.Device, res.Info.Precision, cfg.Checkpoint.Every, cfg.Epochs, took.Seconds(), inChunk.Seconds())
}
