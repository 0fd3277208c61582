package gpu

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// TestGEMMVariantsTrainTheSameBits trains the default network at batch
// 4096 (where the 128-row tiles are chosen) with every GEMM variant the
// kernels offer and requires the same weights,
// bit for bit, from the same seed: a tile shape or pipeline depth changes
// which block computes an output, never the order in which its k terms are
// summed (k16 steps in ascending k), so any variant may become the default
// without changing a run's results. Each variant is set for the whole
// process while its trainer is built (gemmVariant), and put back after.
func TestGEMMVariantsTrainTheSameBits(t *testing.T) {
	b, err := NewBackend(0)
	if err != nil {
		SkipWithoutGPU(t, err)
	}
	saved := gemmVariant
	defer func() { gemmVariant = saved }()
	cfg := config.Defaults()
	cfg.Device, cfg.Precision = "cuda", config.PrecisionBF16Mixed
	cfg.Data.Path, cfg.Data.SyntheticBars = market.SyntheticPath, 3000
	cfg.BatchSize, cfg.StepsPerEpoch = 4096, 10
	ds, err := market.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ref map[string][]byte
	refName := ""
	for _, v := range gemmVariants {
		gemmVariant = v
		name := v
		if name == "" {
			name = "default"
		}
		got, err := func() (map[string][]byte, error) {
			tr, err := b.New(ctx, cfg, ds, nil)
			if err != nil {
				return nil, err
			}
			defer tr.Close()
			for i := 0; i < 2; i++ { // past the replay warm-up
				if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
					return nil, err
				}
			}
			st, err := tr.Train(ctx, cfg.StepsPerEpoch, nil)
			if err != nil {
				return nil, err
			}
			if math.IsNaN(st.Loss) || st.Loss <= 0 {
				return nil, fmt.Errorf("loss %v after %d steps", st.Loss, st.Steps)
			}
			ck, err := tr.Snapshot()
			if err != nil {
				return nil, err
			}
			out := map[string][]byte{}
			for _, x := range ck.Tensors {
				out[x.Name] = x.Data
			}
			return out, nil
		}()
		if err != nil {
			t.Fatalf("variant %s: %v", name, err)
		}
		if ref == nil {
			ref, refName = got, name
			continue
		}
		diff := 0
		for k, want := range ref {
			if string(got[k]) != string(want) {
				diff++
				if diff <= 5 {
					t.Errorf("variant %s: tensor %s differs from variant %s's", name, k, refName)
				}
			}
		}
		if len(got) != len(ref) {
			t.Errorf("variant %s: %d tensors, variant %s %d", name, len(got), refName, len(ref))
		}
		t.Logf("variant %s: %d of %d tensors differ from %s", name, diff, len(ref), refName)
	}
}
