package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// trained trains a small CPU run for one epoch in the given precision and
// returns its snapshot, its dataset and its own validation backtest.
func trained(t *testing.T, precision string) (*checkpoint.Checkpoint, *market.Dataset, sim.Report) {
	t.Helper()
	cfg := trainertest.SmallConfig()
	cfg.Device, cfg.Precision = "cpu", precision
	return trainedConfig(t, cfg)
}

// trainedConfig is trained with cfg, a CPU config.
func trainedConfig(t *testing.T, cfg config.RunConfig) (*checkpoint.Checkpoint, *market.Dataset, sim.Report) {
	t.Helper()
	ctx := context.Background()
	ds, err := market.Prepare(ctx, prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cpu.Backend{}.New(ctx, cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(ctx, cfg.StepsPerEpoch, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Backtest(ctx, ds, ds.Valid)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return ck, ds, rep
}

// relabel writes ck to a file as if a CUDA worker had written it in the
// given precision, and reads it back.
func relabel(t *testing.T, ck *checkpoint.Checkpoint, precision string) *checkpoint.Checkpoint {
	t.Helper()
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Device, cfg.Precision = "cuda:0", precision
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	for k, v := range ck.Meta {
		meta[k] = v
	}
	meta[checkpoint.MetaBackend] = "cuda (NVIDIA H200)"
	meta[checkpoint.MetaPrecision] = precision
	meta[checkpoint.MetaConfig] = string(raw)
	path := filepath.Join(t.TempDir(), "gpu.safetensors")
	if _, err := checkpoint.Write(path, &checkpoint.Checkpoint{Meta: meta, Tensors: ck.Tensors}, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	back, _, err := checkpoint.Read(context.Background(), path, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestCheckpointOfACUDARunBacktestsOnTheCPU: a checkpoint whose metadata
// says a CUDA backend wrote it, in fp32, bf16-mixed or bf16, loads on a
// machine without a GPU and backtests as the run's own trainer did (bf16
// in the CPU's bf16-mixed emulation).
func TestCheckpointOfACUDARunBacktestsOnTheCPU(t *testing.T) {
	for _, tc := range []struct{ trained, label, evaluates string }{
		{config.PrecisionFP32, config.PrecisionFP32, config.PrecisionFP32},
		{config.PrecisionBF16Mixed, config.PrecisionBF16Mixed, config.PrecisionBF16Mixed},
		{config.PrecisionBF16Mixed, config.PrecisionBF16, config.PrecisionBF16Mixed},
	} {
		t.Run(tc.label, func(t *testing.T) {
			ck, ds, want := trained(t, tc.trained)
			pol, err := policy.Load(relabel(t, ck, tc.label))
			if err != nil {
				t.Fatal(err)
			}
			if pol.Precision() != tc.evaluates {
				t.Errorf("evaluates in %s, want %s", pol.Precision(), tc.evaluates)
			}
			got, err := pol.Backtest(ds, ds.Valid)
			if err != nil {
				t.Fatal(err)
			}
			if got.Sharpe != want.Sharpe || got.TotalReturn != want.TotalReturn || got.Trades != want.Trades || got.Bars != want.Bars {
				t.Errorf("backtest %+v, the trainer's %+v", got.Metrics, want.Metrics)
			}
		})
	}
}

// TestExportedFilesLoad: an export is a complete network
// (trainer.CheckComplete); an f32 export gives the checkpoint's Q values
// bit for bit; a bf16 export gives them within bf16 rounding of the
// weights.
func TestExportedFilesLoad(t *testing.T) {
	ck, ds, _ := trained(t, config.PrecisionFP32)
	full, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	obs := make([]float32, market.ObsDim)
	ds.Obs(ds.Valid.From, make([]float32, market.NumAgentFeatures), obs)
	want := make([]float32, 10)
	if err := full.QValues(obs, 1, want); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dtype checkpoint.DType
		tol   float64
	}{{checkpoint.F32, 0}, {checkpoint.BF16, 5e-2}} {
		ex, _, err := policy.Export(ck, tc.dtype)
		if err != nil {
			t.Fatal(err)
		}
		if err := trainer.CheckComplete(ex); err != nil {
			t.Fatalf("%s export is not a complete network: %v", tc.dtype, err)
		}
		pol, err := policy.Load(ex)
		if err != nil {
			t.Fatalf("%s export: %v", tc.dtype, err)
		}
		got := make([]float32, 10)
		if err := pol.QValues(obs, 1, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > tc.tol*math.Max(1, math.Abs(float64(want[i]))) {
				t.Errorf("%s export: Q[%d] = %g, checkpoint %g", tc.dtype, i, got[i], want[i])
			}
		}
	}
}

// TestLoadRejectsBadWeights: NaN weights wrap trainer.ErrNonFinite; a
// checkpoint without the network names the missing tensor.
func TestLoadRejectsBadWeights(t *testing.T) {
	ck, _, _ := trained(t, config.PrecisionFP32)
	bad := &checkpoint.Checkpoint{Meta: ck.Meta}
	for _, tn := range ck.Tensors {
		if tn.Name == "online.v1.weight" {
			tn.Data = append([]byte{0, 0, 0xc0, 0x7f}, tn.Data[4:]...)
		}
		bad.Tensors = append(bad.Tensors, tn)
	}
	if _, err := policy.Load(bad); !errors.Is(err, trainer.ErrNonFinite) || !strings.Contains(err.Error(), "online.v1.weight") {
		t.Errorf("NaN weight: %v", err)
	}
	empty := &checkpoint.Checkpoint{Meta: ck.Meta}
	if _, err := policy.Load(empty); !errors.Is(err, checkpoint.ErrMissingTensor) || !strings.Contains(err.Error(), "s1.weight") {
		t.Errorf("no weights: %v", err)
	}
}

// TestPolicyKeepsTheRunsMargin: a checkpoint's env.flat_margin (times its
// reward scale) is the margin of its greedy policy: on observations of the
// validation range each action is model.Greedy of the policy's own Q
// values with that margin, and a margin at the median advantage of the
// positions the plain argmax takes turns some of them flat.
func TestPolicyKeepsTheRunsMargin(t *testing.T) {
	ck, ds, _ := trained(t, config.PrecisionFP32)
	plain, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	rows := ds.Valid.Len()
	obs := make([]float32, rows*market.ObsDim)
	for i := range rows {
		copy(obs[i*market.ObsDim:], ds.Features[(ds.Valid.From+i)*market.NumFeatures:(ds.Valid.From+i+1)*market.NumFeatures])
	}
	q := make([]float32, rows*model.NumActions)
	if err := plain.QValues(obs, rows, q); err != nil {
		t.Fatal(err)
	}
	var adv []float64
	for i := range rows {
		d := q[i*model.NumActions : i*model.NumActions+market.NumDirections]
		if a := model.Greedy(q[i*model.NumActions:(i+1)*model.NumActions], 0); a.Dir != model.FlatDir {
			adv = append(adv, float64(d[a.Dir]-d[model.FlatDir]))
		}
	}
	if len(adv) < 2 {
		t.Fatalf("the plain argmax takes a position on %d of %d bars: too few to place a margin", len(adv), rows)
	}
	slices.Sort(adv)
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Env.RewardScale = 2 // the margin is in reward units: Q units are twice as large
	cfg.Env.FlatMargin = adv[len(adv)/2] / cfg.Env.RewardScale
	ck.Meta[checkpoint.MetaConfig] = string(cfg.JSON())
	pol, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]market.Action, rows)
	if err := pol.Greedy(obs, rows, got); err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for i := range rows {
		qi := q[i*model.NumActions : (i+1)*model.NumActions]
		if want := model.Greedy(qi, cfg.GreedyMargin()); got[i] != want {
			t.Fatalf("bar %d: policy with margin %g chose %+v, model.Greedy of its Q values %+v", i, cfg.GreedyMargin(), got[i], want)
		}
		if got[i] != model.Greedy(qi, 0) {
			flipped++
		}
	}
	t.Logf("margin %.4g in Q units: %d of %d positions of the plain argmax turned flat", cfg.GreedyMargin(), flipped, len(adv))
	if flipped == 0 || flipped == len(adv) {
		t.Errorf("margin at the median advantage turned %d of %d positions flat: want some, not all", flipped, len(adv))
	}
}
