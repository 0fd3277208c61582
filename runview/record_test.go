package runview

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/prices"
)

// TestCompareShowsWhereRunsRanInAFewWords: "run compare"'s "ran on" row
// gives each run's device and precision in a few words (the CPU
// backend's description as a CPU trainer really gives it, and a GPU's
// as the CUDA backend words it), and the descriptions in full below the
// table, one a line.
func TestCompareShowsWhereRunsRanInAFewWords(t *testing.T) {
	cfg := config.Defaults()
	cfg.Device, cfg.BLAS = "cpu", "gonum"
	cfg.Model.Trunk1, cfg.Model.Trunk2, cfg.Model.Head, cfg.Model.Atoms = 16, 16, 8, 11
	cfg.Env.NumEnvs, cfg.Replay.Capacity, cfg.Replay.Warmup, cfg.BatchSize = 4, 512, 64, 16
	b, _, err := backend.Open("cpu", gpu.DefaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := b.New(context.Background(), cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	cpuInfo := tr.Info()
	tr.Close()
	const gpuDevice = "NVIDIA H100 80GB HBM3 (cuda:0, sm_90, 132 SMs, 79 GiB)" // gpu.Backend.Describe's form
	recs := []Record{
		{Run: metadata.Run{RunID: "on-cpu", Backend: cpuInfo.Backend, Device: cpuInfo.Device, Precision: cpuInfo.Precision, Config: []byte(`{}`)}},
		{Run: metadata.Run{RunID: "on-gpu", Backend: "cuda", Device: gpuDevice, Precision: "bf16-mixed", Config: []byte(`{}`)}},
		{Run: metadata.Run{RunID: "not-built", Config: []byte(`{}`)}},
	}
	var out bytes.Buffer
	PrintComparison(&out, Compare(recs))
	var ranOn string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "ran on ") {
			ranOn = l
		}
	}
	if f := strings.Fields(ranOn); len(f) != 7 || f[2] != "cpu/gonum" || f[3] != "fp32" || f[4] != "cuda:0" || f[5] != "bf16-mixed" || f[6] != "-" {
		t.Errorf("ran on row %q; want \"ran on  cpu/gonum fp32  cuda:0 bf16-mixed  -\"", ranOn)
	}
	for _, full := range []string{"on-cpu: cpu backend on " + cpuInfo.Device + ", fp32", "on-gpu: cuda backend on " + gpuDevice + ", bf16-mixed", "not-built: -"} {
		if !strings.Contains(out.String(), "\n  "+full+"\n") {
			t.Errorf("comparison lacks the line %q:\n%s", full, out.String())
		}
	}
	if len(cpuInfo.Device) < 40 {
		t.Errorf("the CPU description %q is short: the test needs the real, long one", cpuInfo.Device)
	}
}
