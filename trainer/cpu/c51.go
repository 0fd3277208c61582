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
		l := int(b) // b ≥ 0: truncation is ⌊b⌋
		lo := float32(l)
		u, hi := l, lo
		if lo != b {
			u, hi = l+1, lo+1 // ⌈b⌉
		}
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

// Constants of exp32 (Cephes expf, S. L. Moshier): ln 2 split in a part
// with few mantissa bits, so that n·ln2Hi is exact, and the rest; and the
// minimax polynomial of (e^r − 1 − r)/r² on |r| ≤ ln(2)/2.
const (
	ln2Hi      = 0.693359375
	ln2Lo      = -2.12194440e-4
	log2e      = 1.44269504088896341
	expMin     = -87.33654 // below: e^x is under the smallest normal float32
	roundMagic = 12582912  // 1.5·2²³
	expPoly0   = 1.9875691500e-4
	expPoly1   = 1.3981999507e-3
	expPoly2   = 8.3334519073e-3
	expPoly3   = 4.1665795894e-2
	expPoly4   = 1.6666665459e-1
	expPoly5   = 5.0000001201e-1
)

// exp32 is e^x for x ≤ 0 (softmax arguments, x − max), in float32
// arithmetic only: with n = round(x·log2 e) and r = (x − n·ln2Hi) − n·ln2Lo,
//
//	e^x = 2^n · (1 + r + r²·P(r)),   P the Cephes expf polynomial
//
// within 2 float32 ulp of e^x (TestExp32IsAccurate), about five times
// cheaper than math.Exp in float64 and the same bits on every machine
// (explicit float32 rounding, no FMA). Below expMin it returns 0 (e^x is
// then subnormal, < 1.2e-38); NaN stays NaN. x > 0 is not used.
func exp32(x float32) float32 {
	if !(x >= expMin) { // x < expMin, or NaN
		if x != x {
			return x
		}
		return 0
	}
	// n = x·log2 e rounded to the nearest integer (ties to even) by the
	// float32 addition of 1.5·2²³, which leaves no fraction bits.
	n := (float32(x*log2e) + roundMagic) - roundMagic
	r := (x - float32(n*ln2Hi)) - float32(n*ln2Lo)
	r2 := float32(r * r)
	p := float32(float32(float32(float32(float32(float32(float32(float32(float32(float32(expPoly0*r)+expPoly1)*r)+expPoly2)*r)+expPoly3)*r)+expPoly4)*r) + expPoly5)
	y := float32(r2*p) + r + 1
	return float32(y * math.Float32frombits(uint32(int32(n)+127)<<23))
}

// log32 is ln x rounded to float32.
func log32(x float32) float32 { return float32(math.Log(float64(x))) }

// finite32 reports whether x is neither NaN nor ±Inf.
func finite32(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
