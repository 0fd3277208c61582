package cli

import (
	"context"
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
