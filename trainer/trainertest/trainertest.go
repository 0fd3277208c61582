// Package trainertest is the conformance suite every trainer backend must
// pass: the CPU reference and the CUDA backend run the same tests, so the
// activities can treat them alike (Run). RunPopulation is the suite of
// a backend's populations (trainer.Population): each member against its
// config trained alone on the same backend.
//
// It also holds the cross-backend harness: CrossCheck (and Compare, which
// returns the Report for a device report) loads the same learner state
// and batch into the CPU reference and a backend under test, both seen as
// a StepLearner, and compares each step of the computation against stated
// Tolerances. A backend's test reads
//
//	ref, _ := cpu.NewStepLearner(cfg.Model, cfg.Optim, config.PrecisionFP32, 1)
//	trainertest.CrossCheck(t, ref, gpuLearner, cfg, trainertest.FP32Tolerances)
//
// and, in bf16-mixed, compares with the CPU's bf16-mixed learner under
// BF16MixedTolerances.
package trainertest

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// SmallConfig is a run small enough for unit tests on any backend: a narrow
// network on the synthetic series, a few steps per epoch.
func SmallConfig() config.RunConfig {
	cfg := config.Defaults()
	cfg.Data.Path = "synthetic"
	cfg.Data.SyntheticBars = 3000
	cfg.Epochs = 4
	cfg.StepsPerEpoch = 6
	cfg.BatchSize = 16
	cfg.Model = config.ModelConfig{Trunk1: 24, Trunk2: 16, Head: 8, Atoms: 11, VMin: -5, VMax: 5}
	cfg.Env.NumEnvs = 4
	cfg.Env.EpisodeBars = 64
	cfg.Env.CollectSteps = 16
	cfg.Env.EpsilonDecaySteps = 500
	cfg.Replay.Capacity = 512
	cfg.Replay.Warmup = 64
	cfg.Replay.BetaSteps = 50
	return cfg
}

// Run runs the conformance suite against b with configs derived from
// SmallConfig with the given device and precision.
func Run(t *testing.T, b trainer.Backend, device, precision string) {
	cfg := SmallConfig()
	cfg.Device, cfg.Precision = device, precision
	RunConfig(t, b, cfg)
}

// RunConfig runs the conformance suite against b with cfg, a config
// derived from SmallConfig (for example with another blas).
func RunConfig(t *testing.T, b trainer.Backend, cfg config.RunConfig) {
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatalf("prepare data: %v", err)
	}
	t.Run("InfoIsTruthful", func(t *testing.T) { testInfo(t, b, cfg, ds) })
	t.Run("ResumeIsBitIdentical", func(t *testing.T) { testResume(t, b, cfg, ds) })
	t.Run("SameSeedSameWeights", func(t *testing.T) { testDeterminism(t, b, cfg, ds) })
	t.Run("TrainStopsOnNonFinite", func(t *testing.T) { testNonFinite(t, b, cfg, ds) })
	t.Run("RestoreRejectsDamagedState", func(t *testing.T) { testRestoreRejects(t, b, cfg, ds) })
	t.Run("BacktestIsGreedyAndRepeatable", func(t *testing.T) { testBacktest(t, b, cfg, ds) })
	t.Run("GreedyStaysFlatBelowTheMargin", func(t *testing.T) { testFlatMargin(t, b, cfg, ds) })
	t.Run("TrainReportsStagnation", func(t *testing.T) { testStagnation(t, b, cfg, ds) })
	t.Run("CaptureIsTheSnapshotOfItsMoment", func(t *testing.T) { testCapture(t, b, cfg, ds) })
	if cfg.Precision == config.PrecisionBF16 {
		t.Run("StateIsStoredAsBF16", func(t *testing.T) { testBF16State(t, b, cfg, ds) })
	}
}

// testStagnation: Train reports the largest gradient norm of its steps
// (at least their mean) and the share of updates that rounding absorbed,
// a fraction.
func testStagnation(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	tr := newTrainer(t, b, cfg, ds, nil)
	ctx := context.Background()
	if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
		t.Fatal(err)
	}
	st, err := tr.Train(ctx, cfg.StepsPerEpoch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !(st.GradNormMax >= st.GradNorm*(1-1e-6)) || st.GradNormMax <= 0 {
		t.Errorf("TrainStats.GradNormMax = %g with mean grad norm %g", st.GradNormMax, st.GradNorm)
	}
	if st.Stagnation == nil || !(*st.Stagnation >= 0 && *st.Stagnation <= 1) {
		t.Errorf("TrainStats.Stagnation = %v, want a share in [0, 1]", st.Stagnation)
	} else {
		t.Logf("%s: stagnation %.4f over %d steps", cfg.Precision, *st.Stagnation, st.Steps)
	}
}

// testBF16State: in precision bf16 every value of the trained state in a
// snapshot (parameters of both networks, Adam moments, spectral vectors)
// is exactly a bfloat16, and Info says the state is bf16.
func testBF16State(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	tr := newTrainer(t, b, cfg, ds, nil)
	if info := tr.Info(); !strings.HasPrefix(info.StateDType, "bf16") {
		t.Errorf("Info().StateDType = %q in precision bf16", info.StateDType)
	}
	epochs(t, tr, cfg, 2)
	s, err := model.ReadState(snapshot(t, tr), cfg.Model)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, x []float32) {
		for i, v := range x {
			if bf16.Round(v) != v {
				t.Errorf("%s[%d] = %g is not a bf16 value", name, i, v)
				return
			}
		}
	}
	check(model.PrefixOnline+"*", s.Online)
	check(model.PrefixTarget+"*", s.Target)
	check(model.TensorAdamM, s.AdamM)
	check(model.TensorAdamV, s.AdamV)
	for i, l := range model.Layers(cfg.Model) {
		check(model.SpectralTensor(l), s.U[i])
	}
}

func newTrainer(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) trainer.Trainer {
	t.Helper()
	tr, err := b.New(context.Background(), cfg, ds, warm)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// epochs runs n epochs of Collect → Train → SyncTarget.
func epochs(t *testing.T, tr trainer.Trainer, cfg config.RunConfig, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
			t.Fatalf("Collect: %v", err)
		}
		if _, err := tr.Train(ctx, cfg.StepsPerEpoch, nil); err != nil {
			t.Fatalf("Train: %v", err)
		}
		if err := tr.SyncTarget(); err != nil {
			t.Fatalf("SyncTarget: %v", err)
		}
	}
}

func snapshot(t *testing.T, tr trainer.Trainer) *checkpoint.Checkpoint {
	t.Helper()
	ck, err := tr.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return ck
}

// equalState reports the first tensor that differs between a and b, bit for bit.
func equalState(t *testing.T, a, b *checkpoint.Checkpoint) {
	t.Helper()
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("snapshots hold %d and %d tensors", len(a.Tensors), len(b.Tensors))
	}
	for i := range a.Tensors {
		ta, tb := a.Tensors[i], b.Tensors[i]
		if ta.Name != tb.Name || ta.DType != tb.DType {
			t.Fatalf("tensor %d: %s/%s vs %s/%s", i, ta.Name, ta.DType, tb.Name, tb.DType)
		}
		if !bytes.Equal(ta.Data, tb.Data) {
			t.Fatalf("tensor %s differs", ta.Name)
		}
	}
}

func testInfo(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	info := newTrainer(t, b, cfg, ds, nil).Info()
	if info.Precision != cfg.Precision {
		t.Errorf("Info().Precision = %q, config asked for %q", info.Precision, cfg.Precision)
	}
	if want := Parameters(cfg.Model); info.Parameters != want {
		t.Errorf("Info().Parameters = %d, want %d", info.Parameters, want)
	}
	if info.Backend == "" || info.Device == "" || info.StorageDType == "" || info.ComputeDType == "" {
		t.Errorf("Info() has empty fields: %+v", info)
	}
}

// Parameters is the number of trainable parameters of the network of
// DESIGN.md §3 for m: trunk s1, s2; value head v1, v2; per branch a1, a2.
func Parameters(m config.ModelConfig) int {
	lin := func(in, out int) int { return in*out + out }
	n := lin(market.ObsDim, m.Trunk1) + lin(m.Trunk1, m.Trunk2) + lin(m.Trunk2, m.Head) + lin(m.Head, m.Atoms)
	for _, k := range market.BranchSizes {
		n += lin(m.Trunk2, m.Head) + lin(m.Head, k*m.Atoms)
	}
	return n
}

// testResume: N epochs, snapshot through a file, restore, N more epochs
// gives the same state, bit for bit, as 2N epochs straight.
func testResume(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	straight := newTrainer(t, b, cfg, ds, nil)
	epochs(t, straight, cfg, 4)
	want := snapshot(t, straight)

	first := newTrainer(t, b, cfg, ds, nil)
	epochs(t, first, cfg, 2)
	path := filepath.Join(t.TempDir(), "mid.safetensors")
	if _, err := checkpoint.Write(path, snapshot(t, first), checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	ck, _, err := checkpoint.Read(context.Background(), path, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := b.Restore(context.Background(), ck, ds)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Cleanup(func() { resumed.Close() })
	epochs(t, resumed, cfg, 2)
	equalState(t, want, snapshot(t, resumed))
}

// testCapture: a trainer.Capturer's capture, encoded after the trainer
// has trained on, is the Snapshot of the moment it was taken, bit for bit
// (RunEpochs encodes and writes it while the next epoch trains). A
// backend that does not capture skips it.
func testCapture(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	tr := newTrainer(t, b, cfg, ds, nil)
	c, ok := tr.(trainer.Capturer)
	if !ok {
		t.Skipf("%T does not implement trainer.Capturer", tr)
	}
	epochs(t, tr, cfg, 2)
	want := snapshot(t, tr)
	encode, err := c.Capture()
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	epochs(t, tr, cfg, 1)
	got, err := encode()
	if err != nil {
		t.Fatalf("encode the capture: %v", err)
	}
	equalState(t, want, got)
	if !reflect.DeepEqual(want.Meta, got.Meta) {
		t.Errorf("the capture's metadata %v, the snapshot's %v", got.Meta, want.Meta)
	}
}

func testDeterminism(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	a := newTrainer(t, b, cfg, ds, nil)
	c := newTrainer(t, b, cfg, ds, nil)
	epochs(t, a, cfg, 2)
	epochs(t, c, cfg, 2)
	equalState(t, snapshot(t, a), snapshot(t, c))
}

// testNonFinite warm-starts from weights holding a NaN: either New refuses
// them or Train stops, with trainer.ErrNonFinite, instead of training on.
func testNonFinite(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	ck := snapshot(t, newTrainer(t, b, cfg, ds, nil))
	poisoned := false
	for i, tn := range ck.Tensors {
		if strings.HasPrefix(tn.Name, model.PrefixOnline) && strings.HasSuffix(tn.Name, ".weight") && tn.DType == checkpoint.F32 {
			data := append([]byte(nil), tn.Data...)
			nan := math.Float32bits(float32(math.NaN()))
			data[0], data[1], data[2], data[3] = byte(nan), byte(nan>>8), byte(nan>>16), byte(nan>>24)
			ck.Tensors[i].Data = data
			poisoned = true
			break
		}
	}
	if !poisoned {
		t.Fatal("snapshot has no online.*.weight F32 tensor")
	}
	ctx := context.Background()
	tr, err := b.New(ctx, cfg, ds, ck)
	if err == nil {
		defer tr.Close()
		if _, err = tr.Collect(ctx, cfg.Env.CollectSteps); err == nil {
			_, err = tr.Train(ctx, cfg.StepsPerEpoch, nil)
		}
	}
	if !errors.Is(err, trainer.ErrNonFinite) {
		t.Fatalf("training with a NaN weight returned %v, want an error wrapping ErrNonFinite", err)
	}
}

func testRestoreRejects(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	tr := newTrainer(t, b, cfg, ds, nil)
	epochs(t, tr, cfg, 1)
	good := snapshot(t, tr)
	for _, name := range []string{model.PrefixOnline + model.Layout(cfg.Model)[0].Name, model.TensorAdamM} {
		damaged := &checkpoint.Checkpoint{Meta: good.Meta}
		for _, tn := range good.Tensors {
			if tn.Name == name {
				tn.Shape = []int{1}
				tn.Data = tn.Data[:tn.DType.Size()]
			}
			damaged.Tensors = append(damaged.Tensors, tn)
		}
		_, err := b.Restore(context.Background(), damaged, ds)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Restore with tensor %s reshaped returned %v, want an error naming it", name, err)
		}
	}
}

// testFlatMargin: with env.flat_margin above any difference of expected
// values the support allows ((v_max − v_min)/reward_scale in reward
// units), every greedy decision is flat (model.Greedy): with ε = 0 the
// collector never holds a position, so every reward is exactly 0, and the
// backtest trades nothing. The same run without the margin is logged for
// comparison.
func testFlatMargin(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	cfg.Env.EpsilonStart, cfg.Env.EpsilonEnd = 0, 0
	ctx := context.Background()
	for _, margin := range []float64{0, 1.01 * (cfg.Model.VMax - cfg.Model.VMin) / cfg.Env.RewardScale} {
		c := cfg
		c.Env.FlatMargin = margin
		tr := newTrainer(t, b, c, ds, nil)
		epochs(t, tr, c, 1)
		st, err := tr.Collect(ctx, c.Env.CollectSteps)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := tr.Backtest(ctx, ds, ds.Valid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("env.flat_margin %g: collector mean reward %.4g; backtest %d trades, exposure %.3f", margin, st.MeanReward, rep.Trades, rep.Exposure)
		if margin > 0 && (st.MeanReward != 0 || rep.Trades != 0 || rep.Exposure != 0) {
			t.Errorf("env.flat_margin %g above every Q difference: collector mean reward %g (want 0: always flat), backtest %d trades and exposure %g (want none)",
				margin, st.MeanReward, rep.Trades, rep.Exposure)
		}
	}
}

func testBacktest(t *testing.T, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset) {
	tr := newTrainer(t, b, cfg, ds, nil)
	epochs(t, tr, cfg, 1)
	ctx := context.Background()
	r1, err := tr.Backtest(ctx, ds, ds.Valid)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := tr.Backtest(ctx, ds, ds.Valid)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Sharpe != r2.Sharpe || r1.TotalReturn != r2.TotalReturn || r1.Trades != r2.Trades {
		t.Errorf("two backtests of the same weights differ: %+v vs %+v", r1.Metrics, r2.Metrics)
	}
	if r1.Bars != ds.Valid.Len() {
		t.Errorf("backtest covered %d bars, want %d", r1.Bars, ds.Valid.Len())
	}
	before := snapshot(t, tr)
	if _, err := tr.Backtest(ctx, ds, ds.Valid); err != nil {
		t.Fatal(err)
	}
	equalState(t, before, snapshot(t, tr)) // a backtest changes no training state
}
