package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/walkforward"
)

// run runs the command line with args and returns stdout, stderr and the
// exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// tinyConfig writes a config small enough to train in a second.
func tinyConfig(t *testing.T, dir string) string {
	t.Helper()
	return writeTinyConfig(t, filepath.Join(dir, "tiny.json"), nil)
}

// writeTinyConfig writes to path the tiny config the command tests train
// (two epochs of four steps of a small network), its top-level keys
// replaced by those of edit, and returns path.
func writeTinyConfig(t *testing.T, path string, edit map[string]any) string {
	t.Helper()
	cfg := map[string]any{
		"epochs": 2, "steps_per_epoch": 4, "batch_size": 16,
		"model":  map[string]any{"trunk1": 16, "trunk2": 16, "head": 8, "atoms": 11},
		"env":    map[string]any{"num_envs": 4, "episode_bars": 64, "collect_steps": 16},
		"replay": map[string]any{"capacity": 512, "warmup": 64},
	}
	for k, v := range edit {
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readStudy reads the results.json of the walk-forward study in out.
func readStudy(t *testing.T, out string) walkforward.Output {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res walkforward.Output
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestConfigDefaultsPrintsTheFullConfig(t *testing.T) {
	out, _, code := run(t, "config", "defaults")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	got, err := config.Decode("output", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if want := config.Defaults(); string(got.JSON()) != string(want.JSON()) {
		t.Errorf("printed config differs from the defaults:\n%s", out)
	}
	for _, key := range []string{`"seed"`, `"epochs"`, `"steps_per_epoch"`, `"batch_size"`, `"device"`, `"precision"`,
		`"data"`, `"model"`, `"env"`, `"optim"`, `"replay"`, `"checkpoint"`, `"backtest"`} {
		if !strings.Contains(out, key) {
			t.Errorf("defaults lack the key %s", key)
		}
	}
}

// TestTrainBacktestPredictExportOnBothBundledFiles trains a tiny model on
// each bundled file and runs every checkpoint command on both files.
func TestTrainBacktestPredictExportOnBothBundledFiles(t *testing.T) {
	files := []string{"bundled:USA500IDXUSD_H1.csv", "bundled:bitcoin_2024.csv"}
	for _, trainData := range files {
		t.Run(trainData, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := tinyConfig(t, dir)
			out, errOut, code := run(t, "train", "--device", "cpu", "--config", cfgPath, "--data", trainData, "--epochs", "2", "--out", dir, "--json")
			if code != 0 {
				t.Fatalf("train exit %d: %s", code, errOut)
			}
			if !strings.Contains(errOut, "epoch 2/2 [") {
				t.Errorf("train showed no progress bar:\n%s", errOut)
			}
			var rep map[string]any
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("train --json: %v\n%s", err, out)
			}
			ck := filepath.Join(dir, "epoch-000002.safetensors")
			if _, code := runOK(t, "checkpoint", "verify", ck); code != 0 {
				t.Fatal("verify failed")
			}
			for _, data := range files {
				out, _ := runOK(t, "backtest", "--checkpoint", ck, "--data", data, "--json")
				var r map[string]any
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("backtest --json on %s: %v", data, err)
				}
				for _, obj := range []map[string]any{r, sub(t, r, "buy_and_hold"), sub(t, r, "flat")} {
					for _, k := range []string{"sharpe", "sortino", "max_drawdown", "total_return", "trades"} {
						if _, ok := obj[k]; !ok {
							t.Errorf("backtest JSON on %s lacks %q: %v", data, k, obj)
						}
					}
				}
			}
			out, _ = runOK(t, "predict", "--checkpoint", ck, "--data", files[1], "--from", "2024-09-01", "--json")
			var p struct {
				FeatureNames []string `json:"feature_names"`
				GreedyMargin *float64 `json:"greedy_margin"`
				Bars         []struct {
					Features []float64 `json:"features"`
					Q        struct {
						Direction, Size, Exit []float64
					} `json:"q"`
				} `json:"bars"`
			}
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("predict JSON: %v", err)
			}
			if len(p.Bars) < 200 || len(p.FeatureNames) != len(p.Bars[0].Features) ||
				len(p.Bars[0].Q.Direction) != 3 || len(p.Bars[0].Q.Size) != 4 || len(p.Bars[0].Q.Exit) != 3 {
				t.Errorf("predict: %d bars, %d names, first bar %+v", len(p.Bars), len(p.FeatureNames), p.Bars[0].Q)
			}
			if p.GreedyMargin == nil || *p.GreedyMargin != 0 {
				t.Errorf("predict: greedy_margin %v, want the default run's 0", p.GreedyMargin)
			}
			for _, dt := range []string{"f32", "bf16", "f16"} {
				exp := filepath.Join(dir, "export-"+dt+".safetensors")
				runOK(t, "checkpoint", "export", "--checkpoint", ck, "--dtype", dt, "--out", exp)
				ex, _, err := checkpoint.Read(context.Background(), exp, checkpoint.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if tn, ok := ex.Find("s1.weight"); !ok || tn.DType != map[string]checkpoint.DType{"f32": "F32", "bf16": "BF16", "f16": "F16"}[dt] {
					t.Errorf("export %s: s1.weight is %+v", dt, tn.DType)
				}
			}
		})
	}
}

func runOK(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("dqnflow %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out, code
}

func sub(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	v, ok := m[key].(map[string]any)
	if !ok {
		t.Fatalf("JSON has no object %q", key)
	}
	return v
}

// TestBadInputIsNamed: every kind of bad input fails with exit code 1 or 2
// and a message that names the input and the reason.
func TestBadInputIsNamed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.json", `{"optim": {"learning_rate": 0.1}}`)
	outOfRange := write("range.json", `{"batch_size": 0}`)
	badJSON := write("bad.json", "{\n  \"epochs\": 3,\n  \"seed\": \"x\"\n}")
	empty := write("empty.json", "")
	badCSV := write("bad.csv", "time,open,high,low,close\n2024-01-01 00:00,1,2,0.5,1.5\n2024-01-01 01:00,1,0.5,2,1\n")
	corrupt := write("corrupt.safetensors", "not a checkpoint at all, just text")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown command", []string{"frobnicate"}, []string{"unknown command", "frobnicate"}},
		{"unknown flag", []string{"train", "--epoks", "3"}, []string{"epoks"}},
		{"unknown config key", []string{"train", "--config", unknown}, []string{"unknown.json", "line 1 column 12", `unknown key "optim.learning_rate"`, `did you mean "optim.lr"?`}},
		{"empty config file", []string{"train", "--config", empty}, []string{"empty.json", "empty", "{}"}},
		{"config from a device", []string{"train", "--config", os.DevNull}, []string{os.DevNull, "not a regular file"}},
		{"out-of-range value", []string{"train", "--config", outOfRange}, []string{"batch_size", "0"}},
		{"wrong type", []string{"train", "--config", badJSON}, []string{"bad.json", "line 3", "seed"}},
		{"bad flag value", []string{"train", "--epochs", "-1"}, []string{"epochs", "-1"}},
		{"bad device", []string{"train", "--device", "tpu"}, []string{"device", "tpu"}},
		{"bad blas", []string{"train", "--blas", "mkl"}, []string{"blas", "mkl"}},
		{"bad pytorch mode", []string{"bench", "--pytorch", "maybe"}, []string{"--pytorch", "maybe"}},
		{"cuda without backend", []string{"bench", "--device", "cuda:0"}, []string{"cuda:0", "cpu"}},
		{"bad csv", []string{"train", "--data", badCSV}, []string{"bad.csv:3:", "high", "below low"}},
		{"missing file", []string{"train", "--data", filepath.Join(dir, "nope.csv")}, []string{"nope.csv"}},
		{"corrupt checkpoint", []string{"checkpoint", "verify", corrupt}, []string{"corrupt.safetensors"}},
		{"missing flag", []string{"backtest", "--data", "bundled:bitcoin_2024.csv"}, []string{"--checkpoint", "required"}},
		{"bad dtype", []string{"checkpoint", "export", "--checkpoint", corrupt, "--dtype", "f8", "--out", "x"}, []string{"--dtype", "f8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := run(t, c.args...)
			if code == 0 {
				t.Fatalf("exit 0, want failure")
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q does not mention %q", strings.TrimSpace(errOut), w)
				}
			}
		})
	}
}

// TestMissingOpenBLASIsAnError runs "train --blas openblas" in a child
// process whose OpenBLAS cannot be found (this process may already have
// opened it): the run fails, naming the blas setting, the path tried and
// how to install it, rather than falling back to gonum.
func TestMissingOpenBLASIsAnError(t *testing.T) {
	if os.Getenv("DQNFLOW_CLI_CHILD") == "1" {
		os.Exit(Main(context.Background(), strings.Fields(os.Getenv("DQNFLOW_CLI_ARGS")), os.Stdout, os.Stderr))
	}
	cfg := tinyConfig(t, t.TempDir())
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingOpenBLASIsAnError$")
	cmd.Env = append(os.Environ(), "DQNFLOW_CLI_CHILD=1", "DQNFLOW_OPENBLAS=/nonexistent/libopenblas.so.0",
		"DQNFLOW_CLI_ARGS=train --device cpu --blas openblas --out "+t.TempDir()+" --config "+cfg)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("train --blas openblas without OpenBLAS succeeded:\n%s", out)
	}
	for _, want := range []string{`blas "openblas"`, "/nonexistent/libopenblas.so.0", "apt-get install libopenblas0", "--blas gonum"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
}
