package model

import (
	"math"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/config"
)

// Random streams of rand.NewPCG(seed, stream): one for the weights, one
// for the spectral-norm vectors, so that either can change without moving
// the other.
const (
	StreamInit     = 0x6471_6e66_6c6f_7701 // "dqnflow" + 1
	StreamSpectral = 0x6471_6e66_6c6f_7702
)

// InitParams fills p (laid out as Layout(m), len(p) ≥ NumParams(m)) with
// PyTorch's default nn.Linear initialisation: every weight and bias of a
// layer with in inputs is drawn from U(−k, k), k = 1/√in. The draws come
// from rand.NewPCG(seed, StreamInit) in layout order, block by block and
// element by element in memory order, each value computed from one 64-bit
// output x as float32((2·(x≫11)·2⁻⁵³ − 1)·k), so that another
// implementation of PCG-DXSM can reproduce it.
func InitParams(p []float32, m config.ModelConfig, seed uint64) {
	r := rand.NewPCG(seed, StreamInit)
	for _, l := range Layers(m) {
		k := 1 / math.Sqrt(float64(l.In))
		for i := l.W; i < l.B+l.Out; i++ {
			p[i] = float32((2*unitFloat(r.Uint64()) - 1) * k)
		}
	}
}

// unitFloat maps a 64-bit random value to [0, 1) with 53 bits: (x≫11)·2⁻⁵³.
func unitFloat(x uint64) float64 { return float64(x>>11) * (1.0 / (1 << 53)) }

// InitSpectral returns the initial spectral-norm vectors u_i (Out_i values
// for layer i): each element float32(NormFloat64()) of
// rand.New(rand.NewPCG(seed, StreamSpectral)), layer after layer, then each
// vector divided by its norm, u ← float32(u/‖u‖) with ‖u‖ summed in float64
// in index order (see Normalise).
func InitSpectral(m config.ModelConfig, seed uint64) [NumLayers][]float32 {
	var u [NumLayers][]float32
	r := rand.New(rand.NewPCG(seed, StreamSpectral))
	for i, l := range Layers(m) {
		u[i] = make([]float32, l.Out)
		for k := range u[i] {
			u[i][k] = float32(r.NormFloat64())
		}
		Normalise(u[i])
	}
	return u
}

// Normalise divides x by its L2 norm in place, x_k ← float32(x_k/‖x‖) with
// ‖x‖ = √(Σ_k x_k²) summed in float64 in index order, reporting false (and
// leaving x alone) when the norm is zero or not finite.
func Normalise(x []float32) bool {
	var s float64
	for _, e := range x {
		s += float64(e) * float64(e)
	}
	nrm := math.Sqrt(s)
	if nrm == 0 || math.IsNaN(nrm) || math.IsInf(nrm, 0) {
		return false
	}
	for i, e := range x {
		x[i] = float32(float64(e) / nrm)
	}
	return true
}
