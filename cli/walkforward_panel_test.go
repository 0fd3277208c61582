package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/walkforward"
)

// TestWalkForwardPanelFlagTrainsAPanel: --panel makes the study train one
// agent a seed on a window's training series together, its checkpoint
// under window-N/panel/ (walkforward's TestPanelStudyTrainsOneAgentOnTheTrainingSeries
// checks the figures; this checks the flag's wiring).
func TestWalkForwardPanelFlagTrainsAPanel(t *testing.T) {
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{
		"epochs": 1, "steps_per_epoch": 2, "batch_size": 16,
		"model":    map[string]any{"trunk1": 16, "trunk2": 16, "head": 8, "atoms": 11},
		"env":      map[string]any{"num_envs": 4, "episode_bars": 64, "collect_steps": 16},
		"replay":   map[string]any{"capacity": 512, "warmup": 64},
		"backtest": map[string]any{"every": 1, "patience": 5, "min_valid_t": 2},
	})
	cfgPath := filepath.Join(dir, "tiny.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "wf")
	_, errOut, code := run(t, "walkforward", "--config", cfgPath, "--device", "cpu",
		"--series", "../walkforward/testdata/EURUSD_H4.csv,../walkforward/testdata/USDJPY_H4.csv",
		"--step", "1w", "--test", "1w", "--valid", "1w", "--min-train", "0", "--seeds", "1", "--panel", "--checkpoints", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res walkforward.Output
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Panel {
		t.Errorf("results.json: panel false with --panel")
	}
	if _, err := os.Stat(filepath.Join(out, "window-1", "panel", "seed-1.safetensors")); err != nil {
		t.Errorf("--panel --checkpoints: %v", err)
	}
}
