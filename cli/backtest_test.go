package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// TestBacktestRunsACUDACheckpointOnTheCPU: `dqnflow backtest` and
// `predict` run a checkpoint whose metadata says a CUDA worker wrote it,
// on this machine without a GPU, with the same output as the CPU
// checkpoint it was made from. (trainer/policy's tests cover the
// precisions, bf16 included.)
func TestBacktestRunsACUDACheckpointOnTheCPU(t *testing.T) {
	dir := t.TempDir()
	cfgPath := tinyConfig(t, dir)
	const data = "bundled:bitcoin_2024.csv"
	runOK(t, "train", "--device", "cpu", "--config", cfgPath, "--data", data, "--epochs", "1", "--out", dir, "--json")
	ckPath := filepath.Join(dir, "epoch-000001.safetensors")
	ck, _, err := checkpoint.Read(context.Background(), ckPath, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ck.Meta[checkpoint.MetaBackend] = "cuda (NVIDIA H200)"
	gpuPath := filepath.Join(dir, "gpu.safetensors")
	if _, err := checkpoint.Write(gpuPath, ck, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"backtest", "predict"} {
		want, _ := runOK(t, cmd, "--checkpoint", ckPath, "--data", data, "--json")
		got, _ := runOK(t, cmd, "--checkpoint", gpuPath, "--data", data, "--json")
		if len(got) < 100 {
			t.Errorf("%s of the CUDA checkpoint printed %q", cmd, got)
		}
		if got != strings.ReplaceAll(want, ckPath, gpuPath) {
			t.Errorf("%s of the CUDA-labelled checkpoint differs from the CPU one:\n%.300s\n%.300s", cmd, got, want)
		}
	}
}

// TestBacktestStatesTheRoundTripCostOnce: the text report of a backtest,
// and of a training run, gives the cost of a round trip once, with what it
// is measured against, and the value is the report's own (its range's
// mean close), not a second one at another price.
func TestBacktestStatesTheRoundTripCostOnce(t *testing.T) {
	dir := t.TempDir()
	cfgPath := tinyConfig(t, dir)
	const data = "bundled:USA500IDXUSD_H1.csv"
	trainOut, trainErr, code := run(t, "train", "--device", "cpu", "--config", cfgPath, "--data", data, "--epochs", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("train: exit %d\n%s", code, trainErr)
	}
	ck := filepath.Join(dir, "epoch-000001.safetensors")
	text, _ := runOK(t, "backtest", "--checkpoint", ck, "--data", data)
	js, _ := runOK(t, "backtest", "--checkpoint", ck, "--data", data, "--json")
	var rep struct {
		CostPerRoundTripBps float64 `json:"cost_per_round_trip_bps"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("cost per round trip: %.2f bps of one contract's notional at this range's mean close (ES)", rep.CostPerRoundTripBps)
	for name, out := range map[string]string{"backtest": text, "train": trainErr + trainOut} {
		if n := strings.Count(out, "round trip"); n != 1 {
			t.Errorf("%s states the round-trip cost %d times:\n%s", name, n, out)
		}
	}
	if !strings.Contains(text, want) {
		t.Errorf("backtest does not say %q:\n%s", want, text)
	}
}
