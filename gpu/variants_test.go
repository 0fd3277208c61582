package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/internal/gputest"
	"github.com/dqnflow/dqnflow/gpu/kernels"
	"math"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// testBackend is NewBackend(0, tu) or a skip with the reason.
func testBackend(t *testing.T, tu device.Tuning) *Backend {
	t.Helper()
	b, err := NewBackend(0, tu)
	if err != nil {
		gputest.SkipWithoutGPU(t, err)
	}
	return b
}

// differingTensors returns, sorted, the names of want's tensors whose bytes
// in got differ (or are missing).
func differingTensors(got, want map[string][]byte) []string {
	var diff []string
	for k, w := range want {
		if string(got[k]) != string(w) {
			diff = append(diff, k)
		}
	}
	slices.Sort(diff)
	return diff
}

// trainBatch4096 trains the default network in the given precision at
// batch 4096 for 10 steps past the replay warm-up, from seed 1 on
// synthetic data, and returns its weights by tensor name and the GEMM
// paths its step took.
func trainBatch4096(b *Backend, precision string) (map[string][]byte, gemmPaths, error) {
	var none gemmPaths
	cfg := config.Defaults()
	cfg.Device, cfg.Precision = "cuda", precision
	cfg.Data.Path, cfg.Data.SyntheticBars = prices.SyntheticPath, 3000
	cfg.BatchSize, cfg.StepsPerEpoch = 4096, 10
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		return nil, none, err
	}
	ctx := context.Background()
	tr, err := b.New(ctx, cfg, ds, nil)
	if err != nil {
		return nil, none, err
	}
	defer tr.Close()
	for i := 0; i < 2; i++ { // past the replay warm-up
		if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
			return nil, none, err
		}
	}
	st, err := tr.Train(ctx, cfg.StepsPerEpoch, nil)
	if err != nil {
		return nil, none, err
	}
	if math.IsNaN(st.Loss) || st.Loss <= 0 {
		return nil, none, fmt.Errorf("loss %v after %d steps", st.Loss, st.Steps)
	}
	g := tr.(*Trainer)
	p, ok := g.l.Plans[cfg.BatchSize]
	if !ok {
		return nil, none, fmt.Errorf("no step plan at batch %d", cfg.BatchSize)
	}
	var paths gemmPaths
	isWG := func(ln device.Launch) bool {
		for _, name := range kernels.WGMMANames {
			if f, ok := g.l.K.Fn[name]; ok && ln.F == f {
				return true
			}
		}
		return false
	}
	for _, ln := range p.Fwd {
		paths.forward = paths.forward || isWG(ln)
	}
	for _, ln := range p.Bwd {
		if isWG(ln) {
			paths.inputGrads++
		}
	}
	ck, err := tr.Snapshot()
	if err != nil {
		return nil, none, err
	}
	out := map[string][]byte{}
	for _, x := range ck.Tensors {
		out[x.Name] = x.Data
	}
	return out, paths, nil
}

// gemmPaths is where a step's GEMMs ran: whether its forward launches ran
// a wgmma kernel, and how many of its backward launches did (the input
// gradients moved there: backwardLaunches).
type gemmPaths struct {
	forward    bool
	inputGrads int
}

// TestWGMMATrainsLikeMMA trains batch 4096 (whose forward GEMMs take the
// wgmma tiles where the device has them) with the forward GEMMs and the
// backward's input gradients on wgmma (Tuning.WGMMADX "on", so that all
// three stages move at this batch) and with every GEMM on mma.sync
// (Tuning.mmaOnly),
// from the same seed, in bf16-mixed and in fp32 (3xTF32), checks that each
// run took the path it was meant to, and requires the same weights bit
// for bit (ADR 0020, ADR 0021, ADR 0023): both paths sum each output's k
// terms in k steps of 32 bytes (k16 of bf16, k8 of TF32, fp32's three
// products in tfLoop's order) in ascending k into float32, the tensor
// cores round the two instructions alike, and the input gradients' column
// sums keep the mma.sync tile's order (wgColSums). Where they differ it
// reports how far, relative to each tensor's largest magnitude.
func TestWGMMATrainsLikeMMA(t *testing.T) {
	tu := gputest.Tuning(t)
	tu.WGMMADX = "on"
	b := testBackend(t, tu)
	if !b.s.WGMMA.On {
		t.Skipf("no wgmma on this device: %s", b.s.WGMMA.Desc)
	}
	tu.MmaOnly = true
	mb := testBackend(t, tu)
	for _, precision := range []string{config.PrecisionBF16Mixed, config.PrecisionFP32} {
		t.Run(precision, func(t *testing.T) {
			if precision == config.PrecisionFP32 && !tu.TC() {
				t.Skip("fp32 GEMMs on the CUDA cores (DQNFLOW_FP32_GEMM=simt): no wgmma path")
			}
			wgmmaTrainsLikeMMA(t, b, mb, precision)
		})
	}
}

// wgmmaTrainsLikeMMA trains on b (wgmma) and on mb (mma.sync only).
func wgmmaTrainsLikeMMA(t *testing.T, b, mb *Backend, precision string) {
	wg, used, err := trainBatch4096(b, precision)
	if err != nil {
		t.Fatalf("wgmma: %v", err)
	}
	if !used.forward {
		t.Fatal("the wgmma run's forward launches ran no wgmma kernel")
	}
	if used.inputGrads != 3 {
		t.Fatalf("the wgmma run's backward ran %d wgmma launches, want 3 (the input gradients of stages 1 to 3)", used.inputGrads)
	}
	mma, used, err := trainBatch4096(mb, precision)
	if err != nil {
		t.Fatalf("mma.sync: %v", err)
	}
	if used.forward || used.inputGrads > 0 {
		t.Fatalf("the mma.sync run ran wgmma kernels: %+v", used)
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
	t.Logf("%s: wgmma against mma.sync after 10 steps at batch 4096: %d of %d tensors differ; largest relative difference %.3g (%s)", precision, differ, len(mma), worst, worstName)
	if differ > 0 || len(wg) != len(mma) {
		t.Errorf("wgmma's weights are not mma.sync's: %d of %d tensors differ (%d against %d tensors), by up to %.3g relative in %s",
			differ, len(mma), len(wg), len(mma), worst, worstName)
	}
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestStepsPerGraphTrainsTheSameBits trains the default network with one
// training step per graph launch and with graphs of 4 and 3 steps
// (Tuning.StepsPerGraph, ADR 0027): 10 steps are two graphs of 4
// and two single steps, or three graphs of 3 and one single step. The
// steps inside a graph are the same launches on the same data, so every
// tensor must be the same bits. A dependency lost between two steps of a
// graph (the sampling of one step not waiting for the priority update of
// the step before, or the spectral branch of one for the refresh of the
// one before) would show here.
func TestStepsPerGraphTrainsTheSameBits(t *testing.T) {
	var tus []device.Tuning
	for _, k := range []int{1, 4, 3} {
		tu := gputest.Tuning(t)
		tu.StepsPerGraph = k
		tus = append(tus, tu)
	}
	trainsTheSameBits(t, []string{"graphs of 1 step", "graphs of 4 steps", "graphs of 3 steps"}, tus)
}

// trainsTheSameBits trains the default network (trainBatch4096) in fp32
// and in bf16-mixed once in each of the tunings tus, which names name,
// and requires the tensors of every tuning to be the bits of the first's.
func trainsTheSameBits(t *testing.T, names []string, tus []device.Tuning) {
	t.Helper()
	var bs []*Backend
	for _, tu := range tus {
		bs = append(bs, testBackend(t, tu))
	}
	for _, precision := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed} {
		var want map[string][]byte
		for i, name := range names {
			got, _, err := trainBatch4096(bs[i], precision)
			if err != nil {
				t.Fatalf("%s, %s: %v", precision, name, err)
			}
			if i == 0 {
				want = got
				continue
			}
			diff := differingTensors(got, want)
			for _, k := range diff[:min(len(diff), 5)] {
				t.Errorf("%s: tensor %s differs between %s and %s", precision, k, name, names[0])
			}
			if len(got) != len(want) || len(got) == 0 {
				t.Errorf("%s: %d and %d tensors", precision, len(got), len(want))
			}
			t.Logf("%s: %d of %d tensors differ between %s and %s", precision, len(diff), len(want), name, names[0])
		}
	}
}
