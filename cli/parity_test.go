package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/research/parity"
)

// TestParityOnTheCPUEmulation is the reduced convergence-parity study of
// issue 8 §5 on the CPU backend's emulation of each precision mode: four
// epochs of a small network on the synthetic series (seconds on gonum,
// bit-identical on every machine). It checks what the GPU study reports:
// every mode runs all epochs without a NaN or Inf, parity.json holds the
// command line, the curves and the checks, learning-curves.png is a PNG.
// bf16-mixed and bf16 with stochastic rounding hold parity with fp32 on
// every criterion; bf16 rounding to nearest drifts (measured: mean Q 34 %
// off, stagnation 0.88 of the updates against 0.78 with stochastic
// rounding), which the check catches, and dqnflow exits 1 naming the
// figure.
func TestParityOnTheCPUEmulation(t *testing.T) {
	dir := t.TempDir()
	cfg := map[string]any{
		"data":            map[string]any{"path": "synthetic", "synthetic_bars": 3000},
		"steps_per_epoch": 20, "batch_size": 32, "blas": "gonum",
		"model":  map[string]any{"trunk1": 24, "trunk2": 16, "head": 8, "atoms": 11, "v_min": -5, "v_max": 5},
		"env":    map[string]any{"num_envs": 4, "episode_bars": 64, "collect_steps": 16},
		"replay": map[string]any{"capacity": 1024, "warmup": 64},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "small.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "parity")
	stdout, stderr, code := run(t, "parity", "--device", "cpu", "--config", path, "--epochs", "4", "--out", out)
	t.Logf("%s", stdout)
	if code != 1 || !strings.Contains(stderr, "does not hold for bf16 (mean Q") {
		t.Fatalf("exit %d, want 1 with bf16's mean Q named:\n%s", code, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(out, "parity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res parity.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if want := "dqnflow parity --device cpu --config " + path + " --epochs 4 --out " + out; res.Command != want {
		t.Errorf("parity.json records the command %q, want %q", res.Command, want)
	}
	if len(res.Runs) != 4 || res.Runs[0].Mode.Name != "fp32" {
		t.Fatalf("%d runs, first %+v; want fp32, bf16-mixed, bf16, bf16-sr", len(res.Runs), res.Runs[0].Mode)
	}
	for _, r := range res.Runs {
		if r.Error != "" || len(r.Epochs) != 4 {
			t.Errorf("%s: %d epochs, error %q", r.Mode.Name, len(r.Epochs), r.Error)
		}
		if r.Info.Precision != r.Mode.Precision || (r.Mode.Precision == config.PrecisionBF16) != strings.HasPrefix(r.Info.StateDType, "bf16") {
			t.Errorf("%s ran as %+v", r.Mode.Name, r.Info)
		}
	}
	if !res.Holds["bf16-mixed"] || !res.Holds["bf16-sr"] || res.Holds["bf16"] {
		t.Errorf("parity holds for %v; want bf16-mixed and bf16-sr, not bf16", res.Holds)
	}
	stag := map[string]float64{}
	for _, r := range res.Runs {
		stag[r.Mode.Name] = r.Summary.Stagnation
	}
	if stag["fp32"] > 0.01 || stag["bf16-mixed"] > 0.01 || !(stag["bf16-sr"] < stag["bf16"]) {
		t.Errorf("stagnation %v: want near 0 with float32 masters, and lower with stochastic rounding than without", stag)
	}
	png, err := os.ReadFile(filepath.Join(out, res.Plot))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("learning curves %s: %v, not a PNG", res.Plot, err)
	}
}

// TestTrainAndRunStartPrintTheBF16Warning: the two commands that start
// training print precisionWarning when the config selects bf16: train
// before it trains, run start before it asks the server (here none
// answers, so the start fails after the warning).
func TestTrainAndRunStartPrintTheBF16Warning(t *testing.T) {
	dir := t.TempDir()
	var cfg map[string]any
	b, err := os.ReadFile(tinyConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["precision"] = config.PrecisionBF16
	b, _ = json.Marshal(cfg)
	path := filepath.Join(dir, "bf16.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := precisionWarning(config.RunConfig{Precision: config.PrecisionBF16})
	if want == "" {
		t.Skip("bf16 holds parity by the recorded measurement: no warning to print")
	}
	_, errOut, code := run(t, "train", "--device", "cpu", "--config", path, "--epochs", "1", "--out", filepath.Join(dir, "out"))
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("train with precision bf16: exit %d, stderr lacks the warning %q:\n%s", code, want, errOut)
	}
	_, errOut, code = run(t, "run", "start", "--address", "127.0.0.1:1", "--config", path)
	if code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("run start with precision bf16 and no server: exit %d, stderr lacks the warning %q:\n%s", code, want, errOut)
	}
}
