package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWalkForwardPanelFlagTrainsAPanel: --panel makes the study train one
// agent a seed on a window's training series together, its checkpoint
// under window-N/panel/ (walkforward's TestPanelStudyTrainsOneAgentOnTheTrainingSeries
// checks the figures; this checks the flag's wiring).
func TestWalkForwardPanelFlagTrainsAPanel(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeTinyConfig(t, filepath.Join(dir, "tiny.json"), map[string]any{
		"epochs": 1, "steps_per_epoch": 2,
		"backtest": map[string]any{"every": 1, "patience": 5, "min_valid_t": 2},
	})
	out := filepath.Join(dir, "wf")
	_, errOut, code := run(t, "walkforward", "--config", cfgPath, "--device", "cpu",
		"--series", "../walkforward/testdata/EURUSD_H4.csv,../walkforward/testdata/USDJPY_H4.csv",
		"--step", "1w", "--test", "1w", "--valid", "1w", "--min-train", "0", "--seeds", "1", "--panel", "--checkpoints", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	res := readStudy(t, out)
	if !res.Panel {
		t.Errorf("results.json: panel false with --panel")
	}
	if _, err := os.Stat(filepath.Join(out, "window-1", "panel", "seed-1.safetensors")); err != nil {
		t.Errorf("--panel --checkpoints: %v", err)
	}
}
