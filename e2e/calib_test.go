package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

func TestCalib(t *testing.T) {
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.SyntheticBars = "synthetic", 3000
	cfg.Model = config.ModelConfig{Trunk1: 128, Trunk2: 128, Head: 64, Atoms: 21, VMin: -5, VMax: 5}
	cfg.BatchSize = 128
	cfg.StepsPerEpoch = 250
	cfg.Env.NumEnvs, cfg.Env.EpisodeBars, cfg.Env.CollectSteps = 8, 128, 32
	cfg.Env.EpsilonDecaySteps = 5000
	cfg.Replay.Capacity, cfg.Replay.Warmup, cfg.Replay.BetaSteps = 20000, 256, 1000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ds, err := market.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cpu.Backend{}.New(context.Background(), cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepare+new %v", time.Since(t0))
	for e := 0; e < 3; e++ {
		t0 = time.Now()
		tr.Collect(context.Background(), cfg.Env.CollectSteps)
		t1 := time.Now()
		tr.Train(context.Background(), cfg.StepsPerEpoch, nil)
		t2 := time.Now()
		tr.SyncTarget()
		ck, _ := tr.Snapshot()
		t3 := time.Now()
		tr.Backtest(context.Background(), ds, ds.Valid)
		t.Logf("collect %v train %v snap %v (%d tensors) backtest %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), len(ck.Tensors), time.Since(t3))
	}
}
