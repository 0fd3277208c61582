package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer/model"
	"gonum.org/v1/gonum/mat"
)

// TestAdamWMatchesClosedForm checks two AdamW steps against the formulas
// evaluated in float64: the first step is θ − lr·λ·θ − lr·g/(|g| + ε)
// (bias correction makes m̂ = g and v̂ = g²), the second uses
// m̂ = (β1·g1 + (1−β1)·g2)/(1−β1²) and v̂ likewise.
func TestAdamWMatchesClosedForm(t *testing.T) {
	o := config.OptimConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-3, WeightDecay: 0.1}
	theta := []float32{0.5, -1.25, 3, 0, 2e-3}
	g1 := []float32{0.1, -2, 1e-4, 5, -3e-3}
	g2 := []float32{-0.3, -1, 2e-4, 5, 0}
	for _, decay := range []float64{0, o.WeightDecay} {
		p := append([]float32(nil), theta...)
		m, v := make([]float32, len(p)), make([]float32, len(p))
		adamW(p, g1, m, v, 1, o, decay)
		for i, th := range theta {
			g := float64(g1[i])
			th := float64(th)
			want := th - o.LR*decay*th - o.LR*g/(math.Abs(g)+o.Eps)
			if d := math.Abs(float64(p[i]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("decay %g, step 1, θ[%d] = %.9g, closed form %.9g", decay, i, p[i], want)
			}
		}
		after1 := append([]float32(nil), p...)
		adamW(p, g2, m, v, 2, o, decay)
		for i := range theta {
			a, b := float64(g1[i]), float64(g2[i])
			mh := (o.Beta1*(1-o.Beta1)*a + (1-o.Beta1)*b) / (1 - o.Beta1*o.Beta1)
			vh := (o.Beta2*(1-o.Beta2)*a*a + (1-o.Beta2)*b*b) / (1 - o.Beta2*o.Beta2)
			th := float64(after1[i])
			want := th - o.LR*decay*th - o.LR*mh/(math.Sqrt(vh)+o.Eps)
			if d := math.Abs(float64(p[i]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("decay %g, step 2, θ[%d] = %.9g, closed form %.9g", decay, i, p[i], want)
			}
		}
	}
}

// TestStepDecaysWeightsNotBiases checks, on the learner's AdamW update with
// a zero gradient, that AdamW's decoupled decay shrinks every weight by the
// factor 1 − lr·λ and leaves every bias as it was.
func TestStepDecaysWeightsNotBiases(t *testing.T) {
	o := refOptim
	o.SpectralBound = 0
	l := testLearner(t, refModel, o, config.PrecisionFP32, 3)
	before := l.online.Params()
	clear(l.grad)
	l.step++
	l.applyAdamW()
	for _, blk := range model.Layout(refModel) {
		for k := 0; k < blk.Size(); k++ {
			i := blk.Offset + k
			want := float64(before[i])
			if !blk.Bias {
				want *= 1 - o.LR*o.WeightDecay
			}
			if d := math.Abs(float64(l.online.params[i]) - want); d > 1e-7*math.Abs(want) {
				t.Fatalf("%s[%d] = %.9g, want %.9g", blk.Name, k, l.online.params[i], want)
			}
		}
	}
}

// TestClippingScalesToTheBound checks that a step whose gradient norm
// exceeds clip_norm feeds AdamW a gradient of norm exactly clip_norm: after
// the first step m = (1 − β1)·g_clipped, so ‖m‖ = (1 − β1)·clip_norm.
func TestClippingScalesToTheBound(t *testing.T) {
	o := refOptim
	o.ClipNorm = 1e-3 // far below the gradient norm of a fresh network
	l := testLearner(t, refModel, o, config.PrecisionFP32, 5)
	res, err := l.Step(randomBatch(rand.New(rand.NewPCG(9, 9)), 8))
	if err != nil {
		t.Fatal(err)
	}
	if res.GradNorm <= o.ClipNorm {
		t.Fatalf("gradient norm %g does not exceed clip_norm %g: the test needs it to", res.GradNorm, o.ClipNorm)
	}
	if got, want := l2norm(l.m), (1-o.Beta1)*o.ClipNorm; math.Abs(got-want) > 1e-6*want {
		t.Errorf("‖m‖ after one clipped step = %.9g, want (1−β1)·clip = %.9g", got, want)
	}
	g := []float32{3, 4, 12} // ‖g‖ = 13
	scale(g, float32(6.5/l2norm(g)))
	if got := l2norm(g); math.Abs(got-6.5) > 1e-6 {
		t.Errorf("‖g‖ after clipping (3, 4, 12) to 6.5 = %.9g", got)
	}
}

// randMatrix returns a rows×cols matrix with N(0,1) entries.
func randMatrix(r *rand.Rand, rows, cols int) []float32 {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	return w
}

// largestSingularValue is the reference σ₁ from gonum's float64 SVD.
func largestSingularValue(t *testing.T, w []float32, rows, cols int) float64 {
	t.Helper()
	d := make([]float64, len(w))
	for i, x := range w {
		d[i] = float64(x)
	}
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(rows, cols, d), mat.SVDNone) {
		t.Fatal("SVD did not converge")
	}
	return svd.Values(nil)[0]
}

// TestSpectralEstimateMatchesSVD checks that repeated power iterations
// converge to the largest singular value of gonum's SVD, and that a matrix
// above the bound ends at the bound while one below it is left alone.
func TestSpectralEstimateMatchesSVD(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range []struct{ rows, cols int }{{20, 13}, {13, 20}, {51, 8}} {
		w := randMatrix(r, sh.rows, sh.cols)
		u := make([]float32, sh.rows)
		for i := range u {
			u[i] = float32(r.NormFloat64())
		}
		model.Normalise(u)
		v, wv := make([]float32, sh.cols), make([]float32, sh.rows)
		want := largestSingularValue(t, w, sh.rows, sh.cols)
		var sigma float64
		for k := 0; k < 300; k++ {
			sigma = spectralStep(w, sh.rows, sh.cols, u, v, wv, 0)
		}
		if math.Abs(sigma-want) > 1e-5*want {
			t.Errorf("%d×%d: power-iteration σ = %.9g, SVD σ₁ = %.9g", sh.rows, sh.cols, sigma, want)
		}

		// Scale to σ₁ = 10, then bound at 4 with fresh u: one step per
		// optimiser step, as Step does.
		scale(w, float32(10/want))
		for i := range u {
			u[i] = float32(r.NormFloat64())
		}
		model.Normalise(u)
		for k := 0; k < 100; k++ {
			spectralStep(w, sh.rows, sh.cols, u, v, wv, 4)
		}
		if got := largestSingularValue(t, w, sh.rows, sh.cols); math.Abs(got-4) > 1e-4 {
			t.Errorf("%d×%d: σ₁ after bounding at 4 = %.9g", sh.rows, sh.cols, got)
		}
		before := append([]float32(nil), w...)
		spectralStep(w, sh.rows, sh.cols, u, v, wv, 5)
		for i := range w {
			if w[i] != before[i] {
				t.Fatalf("%d×%d: a matrix with σ₁ = 4 changed under bound 5", sh.rows, sh.cols)
			}
		}
	}
	// A zero matrix has no direction: nothing changes and σ = 0.
	w, u := make([]float32, 6), []float32{1, 0}
	if s := spectralStep(w, 2, 3, u, make([]float32, 3), make([]float32, 2), 1); s != 0 || u[0] != 1 {
		t.Errorf("zero matrix: σ = %g, u = %v; want 0 and u unchanged", s, u)
	}
}

// TestSpectralStepReadsTheWeightsTheGradientSaw checks the order of a
// training step's spectral step (ADR 0025): the power iteration runs on
// the weights before AdamW, from the stored u, and the bound scales the
// weights AdamW left by that σ. The expected state is built from its
// parts: a step of the same learner without the bound (AdamW alone), and
// powerStep on the weights before it; every tensor must match bit for bit,
// in fp32 and in bf16 (where u and the scaled weights are stored as bf16).
// The test also checks that the order matters here: the power iteration on
// the weights after AdamW gives another u.
func TestSpectralStepReadsTheWeightsTheGradientSaw(t *testing.T) {
	const bound = 0.8 // below σ of some of mediumModel's initial matrices, above others
	for _, precision := range []string{config.PrecisionFP32, config.PrecisionBF16} {
		o := refOptim
		o.SpectralBound = bound
		l := testLearner(t, mediumModel, o, precision, 7)
		plain := refOptim
		plain.SpectralBound = 0
		a := testLearner(t, mediumModel, plain, precision, 7)
		before := l.State()
		if err := a.SetState(before); err != nil {
			t.Fatal(err)
		}
		b := randomBatch(rand.New(rand.NewPCG(3, 4)), 40)
		if _, err := a.Step(b); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Step(b); err != nil {
			t.Fatal(err)
		}
		want := a.State()
		scaled, differs := 0, false
		for i, ly := range l.online.lay {
			u := slices.Clone(before.U[i])
			sigma := powerStep(before.Online[ly.W:ly.B], ly.Out, ly.In, u, make([]float32, ly.In), make([]float32, ly.Out))
			post := slices.Clone(before.U[i])
			powerStep(want.Online[ly.W:ly.B], ly.Out, ly.In, post, make([]float32, ly.In), make([]float32, ly.Out))
			if l.online.full {
				bf16.RoundSlice(u)
				bf16.RoundSlice(post)
			}
			if _, same := sameBits(u, post); !same {
				differs = true
			}
			w := want.Online[ly.W:ly.B]
			if boundScale(w, sigma, bound) {
				scaled++
				if l.online.full {
					bf16.RoundSlice(w)
				}
			}
			if k, ok := sameBits(l.u[i], u); !ok {
				t.Errorf("%s %s: u[%d] = %g, want %g (the power iteration on the weights before AdamW)", precision, ly.Name, k, l.u[i][k], u[k])
			}
		}
		if k, ok := sameBits(l.online.params, want.Online); !ok {
			t.Errorf("%s: parameter %d = %g, want %g (AdamW, then the bound by the σ before it)", precision, k, l.online.params[k], want.Online[k])
		}
		if scaled == 0 || scaled == len(l.online.lay) {
			t.Errorf("%s: the bound scaled %d of %d matrices; the test needs some scaled and some not", precision, scaled, len(l.online.lay))
		}
		if !differs {
			t.Errorf("%s: the power iteration gives the same u before and after AdamW; the test cannot tell the orders apart", precision)
		}
	}
}
