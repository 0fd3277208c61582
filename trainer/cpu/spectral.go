package cpu

import (
	"math"

	"github.com/dqnflow/dqnflow/trainer/model"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// spectralStep bounds the spectral norm of the rows×cols weight matrix w
// (row-major) with one power iteration from the persistent left vector u
// (rows) and scratch v (cols) and wv (rows) (Miyato et al. 2018, "Spectral
// normalization for generative adversarial networks", Algorithm 1, used
// here as a projection rather than as a reparametrisation of W):
//
//	v ← Wᵀu / ‖Wᵀu‖,   u ← Wv / ‖Wv‖,   σ = uᵀWv = ‖Wv‖
//	W ← W·float32(bound/σ)   when bound > 0 and σ > bound
//
// It is powerStep and boundScale on the same W. A training step (Learner.Step)
// runs powerStep on the weights its gradient was taken at and boundScale
// on the weights AdamW left (ADR 0025). It returns σ, the estimate of the
// largest singular value of W before scaling; repeated steps converge to
// it as (σ₂/σ₁)^2k.
func spectralStep(w []float32, rows, cols int, u, v, wv []float32, bound float64) float64 {
	sigma := powerStep(w, rows, cols, u, v, wv)
	boundScale(w, sigma, bound)
	return sigma
}

// powerStep is the power iteration of spectralStep: v ← Wᵀu/‖Wᵀu‖,
// u ← Wv/‖Wv‖, and it returns σ = ‖Wv‖. The matrix-vector products are
// gonum float32 Sgemv; the norms are summed in float64 and the divisions
// done in float64 before rounding to float32. If Wᵀu or Wv is zero (or not
// finite) u is left as it is and σ is 0.
func powerStep(w []float32, rows, cols int, u, v, wv []float32) float64 {
	impl := gonum.Implementation{}
	impl.Sgemv(blas.Trans, rows, cols, 1, w, cols, u, 1, 0, v, 1)
	if !model.Normalise(v) {
		return 0
	}
	impl.Sgemv(blas.NoTrans, rows, cols, 1, w, cols, v, 1, 0, wv, 1)
	sigma := l2norm(wv)
	if sigma == 0 || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
		return 0
	}
	for i, x := range wv {
		u[i] = float32(float64(x) / sigma)
	}
	return sigma
}

// boundScale is the bound of spectralStep: W ← W·float32(bound/σ) when
// bound > 0 and σ > bound. It reports whether it scaled W.
func boundScale(w []float32, sigma, bound float64) bool {
	if bound > 0 && sigma > bound {
		scale(w, float32(bound/sigma))
		return true
	}
	return false
}
