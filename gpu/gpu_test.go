package gpu_test

import (
	"context"
	"errors"
	"github.com/dqnflow/dqnflow/gpu/internal/gputest"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// backend opens CUDA device 0 in the environment's tuning
// (gpu.TuningFromEnv), or skips with the reason when this machine has no
// driver or no device (DQNFLOW_REQUIRE_GPU=1 turns the skip into a
// failure, for the device script).
func backend(t *testing.T) *gpu.Backend {
	t.Helper()
	tu, err := gpu.TuningFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.NewBackend(0, tu)
	if err != nil {
		gputest.SkipWithoutGPU(t, err)
	}
	return b
}

func TestConformanceFP32(t *testing.T) {
	trainertest.Run(t, backend(t), "cuda", config.PrecisionFP32)
}

func TestConformanceBF16Mixed(t *testing.T) {
	trainertest.Run(t, backend(t), "cuda", config.PrecisionBF16Mixed)
}

// TestConformanceBF16 runs the suite in precision bf16, with rounding to
// nearest and with stochastic rounding of the weight update: resume and
// same-seed runs bit-identical, the state all bf16 values.
func TestConformanceBF16(t *testing.T) {
	b := backend(t)
	for _, sr := range []bool{false, true} {
		t.Run(map[bool]string{false: "nearest", true: "stochastic"}[sr], func(t *testing.T) {
			cfg := trainertest.SmallConfig()
			cfg.Device, cfg.Precision, cfg.Optim.StochasticRounding = "cuda", config.PrecisionBF16, sr
			trainertest.RunConfig(t, b, cfg)
		})
	}
}

// TestMatchesCPUReference loads the same weights and batches into the CPU
// reference and the CUDA learner and compares logits, targets, loss,
// gradients, AdamW, the spectral step and the EMA sync within the issue's
// tolerances, on the default network.
func TestMatchesCPUReference(t *testing.T) {
	b := backend(t)
	cfg := config.Defaults()
	for _, tc := range []struct {
		name, precision string
		sr              bool
		tol             trainertest.Tolerances
	}{
		{config.PrecisionFP32, config.PrecisionFP32, false, trainertest.FP32Tolerances},
		{config.PrecisionBF16Mixed, config.PrecisionBF16Mixed, false, trainertest.BF16MixedTolerances},
		{config.PrecisionBF16, config.PrecisionBF16, false, trainertest.BF16Tolerances},
		{config.PrecisionBF16 + "-stochastic", config.PrecisionBF16, true, trainertest.BF16Tolerances},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := cfg.Optim
			o.StochasticRounding = tc.sr
			ref, err := cpu.NewStepLearner(cfg.Model, o, tc.precision, cfg.Seed)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.NewStepLearner(cfg.Model, o, tc.precision, cfg.Seed)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			c := cfg
			c.Precision, c.Optim = tc.precision, o
			rep, err := trainertest.Compare(ref, got, c, tc.tol)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s against the CPU reference:\n%s", tc.precision, rep)
			if f := rep.Failures(); len(f) > 0 {
				t.Errorf("%d comparisons outside tolerance", len(f))
			}
		})
	}
}

// prepared is cfg's dataset (market.Prepare), or a fatal error.
func prepared(t *testing.T, cfg config.RunConfig) *market.Dataset {
	t.Helper()
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestCheckpointsMoveBetweenBackends trains an epoch on the GPU, restores
// its checkpoint on the CPU backend and goes on there, and the reverse.
func TestCheckpointsMoveBetweenBackends(t *testing.T) {
	b := backend(t)
	cfg := trainertest.SmallConfig()
	cfg.Device = "cuda"
	ds := prepared(t, cfg)
	ctx := context.Background()
	epoch := func(tr trainer.Trainer) {
		t.Helper()
		if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(ctx, cfg.StepsPerEpoch, nil); err != nil {
			t.Fatal(err)
		}
		if err := tr.SyncTarget(); err != nil {
			t.Fatal(err)
		}
	}
	g, err := b.New(ctx, cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	epoch(g)
	ck, err := g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpu.Backend{}.Restore(ctx, ck, ds)
	if err != nil {
		t.Fatalf("a GPU checkpoint does not restore on the CPU: %v", err)
	}
	defer c.Close()
	epoch(c)
	ck2, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g2, err := b.Restore(ctx, ck2, ds)
	if err != nil {
		t.Fatalf("a CPU checkpoint does not restore on the GPU: %v", err)
	}
	defer g2.Close()
	epoch(g2)
	if _, err := g2.Backtest(ctx, ds, ds.Valid); err != nil {
		t.Fatal(err)
	}
}

// TestInfoCarriesTheSelfCheck: the precision label comes with the measured
// GEMM behaviour.
func TestInfoCarriesTheSelfCheck(t *testing.T) {
	b := backend(t)
	for _, p := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16} {
		cfg := trainertest.SmallConfig()
		cfg.Device, cfg.Precision = "cuda", p
		ds := prepared(t, cfg)
		tr, err := b.New(context.Background(), cfg, ds, nil)
		if err != nil {
			t.Fatal(err)
		}
		info := tr.Info()
		tr.Close()
		t.Logf("%s: %+v", p, info)
		if info.SelfCheck == "" || info.Backend != "cuda" || info.Precision != p {
			t.Errorf("%s: info %+v lacks the self-check or misreports the mode", p, info)
		}
		if full := p == config.PrecisionBF16; full != strings.Contains(info.SelfCheck, "state bf16") || full != (info.StateDType == "bf16") {
			t.Errorf("%s: state dtype %q, self-check %q: the bf16 state check must run in precision bf16 and only there", p, info.StateDType, info.SelfCheck)
		}
	}
}

// TestMirroredTrainingIsRefusedNamingTheKey: the device collector plays
// one training range, so a data.mirror run is refused before any device
// work, naming the key and the backend that runs it.
func TestMirroredTrainingIsRefusedNamingTheKey(t *testing.T) {
	cfg := trainertest.SmallConfig()
	cfg.Device, cfg.Data.Mirror = "cuda", true
	ds := prepared(t, cfg)
	_, err := new(gpu.Backend).New(context.Background(), cfg, ds, nil)
	if !errors.Is(err, trainer.ErrUnsupported) || !strings.Contains(err.Error(), "data.mirror") || !strings.Contains(err.Error(), `"cpu"`) {
		t.Fatalf("New with data.mirror: %v; want trainer.ErrUnsupported naming data.mirror and the cpu device", err)
	}
}
