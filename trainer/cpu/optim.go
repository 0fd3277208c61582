package cpu

import (
	"math"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
)

// l2norm returns ‖g‖₂ = √(Σ_i g_i²), summed in float64 in index order. The
// sum has ~3·10⁵ terms; float64 keeps the reference far from the rounding
// of any float32 reduction order a GPU may use.
func l2norm(g []float32) float64 {
	var s float64
	for _, x := range g {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// scale multiplies g by c in place (float32). Step clips the gradient with
// c = float32(clip_norm/‖g‖₂), so that ‖g‖₂ becomes clip_norm up to float32
// rounding.
func scale(g []float32, c float32) {
	for i, x := range g {
		g[i] = x * c
	}
}

// store says how an AdamW step stores what it computes: in fp32 and
// bf16-mixed the float32 values; in bf16 mode (full) the moments rounded
// to the nearest bf16 and the parameters rounded to the nearest bf16 or,
// with sr, stochastically (bf16.RoundStochastic) with the random bits
// bf16.SRBits(seed, t, first + i) of parameter first + i of the Layout.
type store struct {
	full, sr bool
	seed     uint64
	first    int
}

// stagnation counts, over the parameter updates of AdamW steps, those
// whose Adam term is not zero (moved) and, of them, those whose stored
// parameter is nevertheless unchanged (stuck): the update was
// absorbed by the rounding of the stored value. stuck/moved is the
// stagnation that trainer.TrainStats reports.
type stagnation struct{ moved, stuck int64 }

func (s *stagnation) add(o stagnation) { s.moved, s.stuck = s.moved+o.moved, s.stuck+o.stuck }

// adamW applies step t (t ≥ 1) of AdamW (Kingma & Ba 2015 with the
// decoupled weight decay of Loshchilov & Hutter 2019) to the parameters p
// with gradient g and moments m, v, element by element in float32:
//
//	m ← β1·m + (1 − β1)·g
//	v ← β2·v + (1 − β2)·g²
//	p ← (p − lr·λ·p) − lr·(m̂ / (√v̂ + ε)),   m̂ = m/(1 − β1ᵗ), v̂ = v/(1 − β2ᵗ)
//
// where λ = decay. Step passes λ = weight_decay for weight matrices and 0
// for biases. The decay uses the parameter before the step, as PyTorch's
// AdamW does. The constants β1, 1 − β1, β2, 1 − β2, 1 − β1ᵗ, 1 − β2ᵗ, lr,
// ε and lr·λ are computed in float64 and each rounded once to float32; √
// is correctly rounded. Everything is stored in float32 (fp32 and
// bf16-mixed); see storedAdamW for bf16.
func adamW(p, g, m, v []float32, t int64, o config.OptimConfig, decay float64) {
	storedAdamW(p, g, m, v, t, o, decay, store{})
}

// storedAdamW is adamW with st saying how m, v and p are stored. The
// update uses the float32 m and v it computed, not their stored values.
// It returns the stagnation of the call: an update moved when its Adam
// term float32(lr·m̂/(√v̂ + ε)) is not zero (the weight decay alone, for a
// parameter whose gradient has always been zero, is not counted: at
// lr·λ ≈ 10⁻⁹ float32 absorbs it too), and is stuck when the stored p
// equals the old one.
func storedAdamW(p, g, m, v []float32, t int64, o config.OptimConfig, decay float64, st store) stagnation {
	b1, c1 := float32(o.Beta1), float32(1-o.Beta1)
	b2, c2 := float32(o.Beta2), float32(1-o.Beta2)
	bc1 := float32(1 - math.Pow(o.Beta1, float64(t)))
	bc2 := float32(1 - math.Pow(o.Beta2, float64(t)))
	lr, eps, lrwd := float32(o.LR), float32(o.Eps), float32(o.LR*decay)
	var c stagnation
	for i, gi := range g {
		mi := float32(b1*m[i]) + float32(c1*gi)
		vi := float32(b2*v[i]) + float32(c2*float32(gi*gi))
		den := float32(math.Sqrt(float64(vi/bc2))) + eps
		old := p[i]
		wd := float32(lrwd * old)
		step := float32(lr * ((mi / bc1) / den))
		pn := (old - wd) - step
		if st.full {
			m[i], v[i] = bf16.Round(mi), bf16.Round(vi)
			if st.sr {
				pn = bf16.RoundStochastic(pn, bf16.SRBits(st.seed, t, st.first+i))
			} else {
				pn = bf16.Round(pn)
			}
		} else {
			m[i], v[i] = mi, vi
		}
		if step != 0 {
			c.moved++
			if pn == old {
				c.stuck++
			}
		}
		p[i] = pn
	}
	return c
}
