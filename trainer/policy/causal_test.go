package policy_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestCausalRunRestoresAndBacktestsAsTrained: a run with data.normalize
// "causal" stores its normaliser's mode, half-life and burn-in in the
// checkpoint, so the run restores on its data prepared again, and
// evaluate's dataset (trainer.CheckpointDataset) has the run's features
// bit for bit and backtests the validation range as the trainer did.
func TestCausalRunRestoresAndBacktestsAsTrained(t *testing.T) {
	ctx := context.Background()
	cfg := trainertest.SmallConfig()
	cfg.Device = "cpu"
	cfg.Data.Normalize, cfg.Data.NormalizeHalfLife = config.NormalizeCausal, 300
	ck, ds, want := trainedConfig(t, cfg)
	if _, norm, err := trainer.CheckpointMarket(ck); err != nil || norm != ds.Norm || !norm.Causal() || norm.HalfLife != 300 || norm.BurnIn != market.CausalBurnIn {
		t.Fatalf("checkpoint normaliser %+v (%v); want the run's causal one", norm.Mode, err)
	}

	again, err := market.Prepare(ctx, prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := cpu.Backend{}.Restore(ctx, ck, again)
	if err != nil {
		t.Fatalf("restore on the data prepared again: %v", err)
	}
	restored.Close()

	_, eval, err := trainer.CheckpointDataset(ctx, prices.Source{}, ck, cfg.Data.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if eval.Warmup != ds.Warmup || !reflect.DeepEqual(eval.Features, ds.Features) {
		t.Fatalf("evaluate's dataset: warmup %d, features equal %v; want warmup %d and the run's features",
			eval.Warmup, reflect.DeepEqual(eval.Features, ds.Features), ds.Warmup)
	}
	pol, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pol.Backtest(eval, ds.Valid)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sharpe != want.Sharpe || got.TotalReturn != want.TotalReturn || got.Trades != want.Trades || got.Bars != want.Bars {
		t.Errorf("backtest %+v, the trainer's %+v", got.Metrics, want.Metrics)
	}
}
