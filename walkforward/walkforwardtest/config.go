// Package walkforwardtest holds what the walk-forward tests of several
// packages share: the tiny run config of the fixture study
// (walkforward/testdata).
package walkforwardtest

import (
	"encoding/json"
	"testing"

	"github.com/dqnflow/dqnflow/config"
)

// TinyConfig trains in a fraction of a second a run, on an instrument
// without costs (so that a baseline's equity is its position times the
// price moves, which the walkforward tests recompute by hand).
func TinyConfig(t testing.TB) config.RunConfig {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{
		"epochs": 2, "steps_per_epoch": 4, "batch_size": 16, "device": "cpu",
		"model":    map[string]any{"trunk1": 16, "trunk2": 16, "head": 8, "atoms": 11},
		"env":      map[string]any{"num_envs": 4, "episode_bars": 64, "collect_steps": 16, "instrument": "custom", "tick_size": 0.0001, "slippage_ticks": 0, "commission": 0},
		"replay":   map[string]any{"capacity": 512, "warmup": 64},
		"backtest": map[string]any{"every": 1, "patience": 5, "min_valid_t": 2},
	})
	cfg, err := config.Decode("tiny", raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
