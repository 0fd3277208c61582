package cpu

import "math"

// project adds to m (Atoms values, zeroed by the caller) the categorical
// projection of the distribution p on the support z, shifted to
// R + discount·z (Bellemare et al. 2017, Algorithm 1). In float32, for each
// atom j:
//
//	Tz_j = clip(R + discount·z_j, v_min, v_max)
//	b_j  = (Tz_j − v_min) / Δz, clamped to [0, Atoms−1] against rounding
//	l    = ⌊b_j⌋,  u = ⌈b_j⌉
//	m_l += p_j·(u − b_j),  m_u += p_j·(b_j − l)   when l < u
//	m_l += p_j                                     when l = u
//
// Products are converted to float32 explicitly, which forbids the compiler
// to fuse them into FMAs on any architecture (the Go spec allows fusion
// otherwise); the same holds throughout this package.
//
// The l = u case keeps the whole mass of an atom that lands exactly on the
// support; the plain two-sided rule would drop it. Σm = Σp up to rounding.
func project(p, z []float32, ret, discount, vmin, vmax, dz float32, m []float32) {
	top := float32(len(z) - 1)
	for j, pj := range p {
		tz := ret + float32(discount*z[j])
		tz = min(max(tz, vmin), vmax)
		b := min(max((tz-vmin)/dz, 0), top)
		lo := float32(math.Floor(float64(b)))
		hi := float32(math.Ceil(float64(b)))
		l, u := int(lo), int(hi)
		if l == u {
			m[l] += pj
			continue
		}
		m[l] += float32(pj * (hi - b))
		m[u] += float32(pj * (b - lo))
	}
}

// crossEntropy returns −Σ_j m_j·logp_j in float32, summed in atom order.
func crossEntropy(m, logp []float32) float32 {
	var s float32
	for j, x := range m {
		s += float32(x * logp[j])
	}
	return -s
}

// exp32 is e^x rounded to float32.
func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// log32 is ln x rounded to float32.
func log32(x float32) float32 { return float32(math.Log(float64(x))) }

// finite32 reports whether x is neither NaN nor ±Inf.
func finite32(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
