package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// precisionModel is wide enough (s1 has 200 > tileCols outputs) and the
// batch long enough (70 > tileRows rows) that GEMMs run in several tiles.
var precisionModel = config.ModelConfig{Trunk1: 200, Trunk2: 48, Head: 16, Atoms: 21, VMin: -10, VMax: 10}

// forwardDiff runs net on rows random observations and returns the largest
// |Δ| of the log-probabilities and of the expected Q values against the
// float64 reference that rounds (mixed) or does not round the GEMM operands.
func forwardDiff(t *testing.T, net *Net, obs []float32, rows int, mixed bool) (dLogp, dQ float64) {
	t.Helper()
	net.ensure(rows)
	net.setInput(0, obs)
	net.forward(rows)
	q := make([]float32, rows*model.NumActions)
	expected(net.act.p[:rows*model.NumActions*net.model.Atoms], net.support, q)
	r := newRef(net.model, net.params, mixed)
	z := refSupport(net.model)
	atoms := net.model.Atoms
	for i := 0; i < rows; i++ {
		logp, p := r.forward(obs[i*market.ObsDim : (i+1)*market.ObsDim])
		for k := range logp {
			qk := 0.0
			for j := range logp[k] {
				dLogp = math.Max(dLogp, math.Abs(float64(net.act.logp[(i*model.NumActions+k)*atoms+j])-logp[k][j]))
				qk += p[k][j] * z[j]
			}
			dQ = math.Max(dQ, math.Abs(float64(q[i*model.NumActions+k])-qk))
		}
	}
	return dLogp, dQ
}

// TestBF16MixedRoundsExactlyTheGEMMOperands checks that the bf16-mixed
// forward equals a float64 forward in which exactly the documented
// operands (observation, weights, hidden activations) are rounded to bf16,
// that fp32 equals the unrounded float64 forward, and that the two modes
// differ by far more than either's error.
func TestBF16MixedRoundsExactlyTheGEMMOperands(t *testing.T) {
	const rows = 70
	r := rand.New(rand.NewPCG(21, 22))
	obs := make([]float32, rows*market.ObsDim)
	for i := range obs {
		obs[i] = float32(r.NormFloat64())
	}
	fp32, err := NewNet(precisionModel, config.PrecisionFP32, 5)
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := NewNet(precisionModel, config.PrecisionBF16Mixed, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Tolerance: float32 accumulation against float64 gives ~4e-7 here
	// (measured) on log-probabilities of size ~3. In mixed mode a hidden
	// activation whose float32 and float64 sums straddle a bf16 rounding
	// boundary would round one bf16 ulp apart and move outputs by ~1e-4;
	// with this seed none does, so the mixed tolerance is as tight as fp32's.
	const tolFP32, tolMixed = 1e-5, 1e-5
	lp, q := forwardDiff(t, fp32, obs, rows, false)
	t.Logf("fp32 vs float64: max |Δ log p| %.3g, max |ΔQ| %.3g", lp, q)
	if lp > tolFP32 || q > tolFP32 {
		t.Errorf("fp32 forward differs from the float64 reference: |Δ log p| %.3g, |ΔQ| %.3g > %g", lp, q, tolFP32)
	}
	lp, q = forwardDiff(t, mixed, obs, rows, true)
	t.Logf("bf16-mixed vs rounded float64: max |Δ log p| %.3g, max |ΔQ| %.3g", lp, q)
	if lp > tolMixed || q > tolMixed {
		t.Errorf("bf16-mixed forward differs from the rounded float64 reference: |Δ log p| %.3g, |ΔQ| %.3g > %g", lp, q, tolMixed)
	}
	lp, q = forwardDiff(t, mixed, obs, rows, false)
	t.Logf("bf16-mixed vs unrounded float64: max |Δ log p| %.3g, max |ΔQ| %.3g", lp, q)
	if lp < 20*tolMixed || q < 20*tolMixed {
		t.Errorf("bf16-mixed forward is within %.3g (log p), %.3g (Q) of the unrounded reference: are the operands rounded?", lp, q)
	}
}

// TestPrecisionModes checks which precision modes the backend accepts.
func TestPrecisionModes(t *testing.T) {
	for _, c := range []struct {
		precision string
		want      error
	}{
		{config.PrecisionFP32, nil},
		{config.PrecisionBF16Mixed, nil},
		{config.PrecisionBF16, nil},
		{"fp16", config.ErrInvalid},
	} {
		_, err := NewLearner(refModel, refOptim, c.precision, 1)
		if !errors.Is(err, c.want) {
			t.Errorf("precision %q: error %v, want %v", c.precision, err, c.want)
		}
	}
}

// TestBF16MixedGradientsRoundExactlyTheGEMMOperands checks the bf16-mixed
// backward pass against a float64 backward pass that rounds exactly the
// documented operands, and that it differs from the fp32 gradient.
func TestBF16MixedGradientsRoundExactlyTheGEMMOperands(t *testing.T) {
	b := randomBatch(rand.New(rand.NewPCG(31, 32)), 6)
	n, err := b.Check()
	if err != nil {
		t.Fatal(err)
	}
	grads := map[string][]float32{}
	var want []float64
	for _, precision := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed} {
		l := testLearner(t, refModel, refOptim, precision, 13)
		l.gradients(b, n)
		grads[precision] = append([]float32(nil), l.grad...)
		if precision == config.PrecisionBF16Mixed {
			online := newRef(refModel, l.online.params, true)
			want = refGradients(online, b, refTargets(online, newRef(refModel, l.target.params, true), b))
		}
	}
	// Per block, |Δ| ≤ 1e-5·max|g| of the block: measured ≤ 2e-7 relative;
	// leaving out one rounding moves gradients by ~1e-3 relative.
	const tol = 1e-5
	for _, blk := range model.Layout(refModel) {
		var scale, dRef, dFP32 float64
		for k := 0; k < blk.Size(); k++ {
			i := blk.Offset + k
			scale = math.Max(scale, math.Abs(want[i]))
			dRef = math.Max(dRef, math.Abs(float64(grads[config.PrecisionBF16Mixed][i])-want[i]))
			dFP32 = math.Max(dFP32, math.Abs(float64(grads[config.PrecisionFP32][i])-want[i]))
		}
		t.Logf("%-12s max|g| %.3g, |Δ| vs rounded reference %.3g, fp32 vs it %.3g", blk.Name, scale, dRef/scale, dFP32/scale)
		if dRef > tol*scale {
			t.Errorf("%s: bf16-mixed gradient differs from the rounded float64 reference by %.3g (max |g| %.3g)", blk.Name, dRef, scale)
		}
		if dFP32 < 10*tol*scale && !blk.Bias {
			t.Errorf("%s: fp32 gradient is within %.3g of the bf16-mixed reference: are the operands rounded?", blk.Name, dFP32)
		}
	}
}
