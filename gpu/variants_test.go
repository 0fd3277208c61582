package gpu

import (
	"context"
	"encoding/binary"
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
	var ref map[string][]byte
	refName := ""
	for _, v := range gemmVariants {
		gemmVariant = v
		name := v
		if name == "" {
			name = "default"
		}
		got, err := trainBatch4096(b)
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

// trainBatch4096 trains the default network in bf16-mixed at batch 4096
// for 10 steps past the replay warm-up, from seed 1 on synthetic data, and
// returns its weights by tensor name.
func trainBatch4096(b *Backend) (map[string][]byte, error) {
	cfg := config.Defaults()
	cfg.Device, cfg.Precision = "cuda", config.PrecisionBF16Mixed
	cfg.Data.Path, cfg.Data.SyntheticBars = market.SyntheticPath, 3000
	cfg.BatchSize, cfg.StepsPerEpoch = 4096, 10
	ds, err := market.Prepare(cfg)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
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
}

// TestWGMMATrainsLikeMMA trains batch 4096 (whose forward GEMMs take the
// wgmma tiles where the device has them) with the forward GEMMs on wgmma
// and on mma.sync (mmaOnly), from the same seed. Both sum each output's k
// terms in k16 steps in ascending k into float32; the test reports whether
// the tensor cores' two instructions give the same bits, and requires
// every weight within 1e-2 of the mma.sync run's (relative to the
// tensor's largest magnitude) where they do not.
func TestWGMMATrainsLikeMMA(t *testing.T) {
	b, err := NewBackend(0)
	if err != nil {
		SkipWithoutGPU(t, err)
	}
	if !b.d.wgmma.on {
		t.Skipf("no wgmma on this device: %s", b.d.wgmma.desc)
	}
	wg, err := trainBatch4096(b)
	if err != nil {
		t.Fatalf("wgmma: %v", err)
	}
	mmaOnly = true
	defer func() { mmaOnly = false }()
	mma, err := trainBatch4096(b)
	if err != nil {
		t.Fatalf("mma.sync: %v", err)
	}
	differ, worst, worstName := 0, 0.0, ""
	for name, want := range mma {
		got := wg[name]
		if string(got) == string(want) {
			continue
		}
		differ++
		if len(got) != len(want) || len(want)%4 != 0 {
			t.Fatalf("tensor %s: %d bytes against %d", name, len(got), len(want))
		}
		g, w := f32s(got), f32s(want)
		scale, d := 0.0, 0.0
		for i := range w {
			scale = math.Max(scale, math.Abs(float64(w[i])))
			d = math.Max(d, math.Abs(float64(g[i]-w[i])))
		}
		if r := d / math.Max(scale, 1e-30); r > worst {
			worst, worstName = r, name
		}
	}
	t.Logf("wgmma against mma.sync after 10 steps at batch 4096: %d of %d tensors differ; largest relative difference %.3g (%s)", differ, len(mma), worst, worstName)
	if worst > 1e-2 {
		t.Errorf("wgmma's weights are %.3g (relative) from mma.sync's in %s: more than 1e-2", worst, worstName)
	}
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
