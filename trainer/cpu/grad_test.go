package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// TestGradientsMatchFiniteDifferences checks the hand-written float32
// backward pass against central differences of the float64 reference loss,
// for every parameter of a small model, and the float32 loss against the
// float64 loss. The C51 targets are constants of the loss (they carry no
// gradient), so the reference computes them once from the unperturbed
// networks.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	l := testLearner(t, refModel, refOptim, config.PrecisionFP32, 7)
	b := randomBatch(rand.New(rand.NewPCG(1, 2)), 4)
	grad := make([]float32, l.NumParams())
	res, err := l.Gradient(b, grad)
	if err != nil {
		t.Fatal(err)
	}
	loss32 := float32(res.Loss)

	online := newRef(refModel, l.online.params, false)
	targets := refTargets(online, newRef(refModel, l.target.params, false), b)
	loss64, per64 := refLoss(online, b, targets)

	// The float32 loss sums ~10² float32 terms of size ≤ 10: 1e-5
	// relative is ~100 float32 ulps.
	if d := math.Abs(float64(loss32) - loss64); d > 1e-5*math.Max(1, math.Abs(loss64)) {
		t.Errorf("loss: float32 %.9g, float64 reference %.9g (|Δ| %.3g)", loss32, loss64, d)
	}
	for i, p := range per64 {
		if d := math.Abs(float64(res.PerSample[i]) - p); d > 1e-5*math.Max(1, p) {
			t.Errorf("per-sample loss %d: float32 %.9g, float64 reference %.9g", i, res.PerSample[i], p)
		}
	}

	// Central differences with step h: truncation error O(h²) ≈ 1e-10 and
	// cancellation error ≈ 1e-16·loss/h ≈ 1e-11, both far below the float32
	// gradient's own rounding.
	const h = 1e-5
	const rtol, atolFrac = 1e-5, 1e-6 // measured worst: ~3e-7 relative
	gmax := 0.0
	for _, g := range grad {
		gmax = math.Max(gmax, math.Abs(float64(g)))
	}
	atol := atolFrac * gmax
	for _, blk := range model.Layout(refModel) {
		worst, worstAt := 0.0, -1
		for k := 0; k < blk.Size(); k++ {
			i := blk.Offset + k
			orig := online.p[i]
			online.p[i] = orig + h
			up, _ := refLoss(online, b, targets)
			online.p[i] = orig - h
			down, _ := refLoss(online, b, targets)
			online.p[i] = orig
			fd := (up - down) / (2 * h)
			got := float64(grad[i])
			if err := math.Abs(got-fd) / (rtol*math.Abs(fd) + atol); err > worst {
				worst, worstAt = err, k
			}
			if math.Abs(got-fd) > rtol*math.Abs(fd)+atol {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", blk.Name, k, got, fd)
			}
		}
		t.Logf("%-12s worst |Δ|/(rtol·|fd| + atol) = %.3g at %d", blk.Name, worst, worstAt)
	}
}
