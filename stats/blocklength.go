package stats

import "math"

// MinBars is the fewest returns a bootstrap interval or an automatic block
// length is computed from: below it a block bootstrap has too few blocks
// for its percentiles to mean anything, and the caller should report the
// series without an interval.
const MinBars = 10

// OptimalBlockLength is the block length that minimises the mean squared
// error of the block bootstrap's estimate of the variance of x's mean:
// the mean block length of the stationary bootstrap and the block length
// of the circular block bootstrap, from Politis and White (2004),
// "Automatic Block-Length Selection for the Dependent Bootstrap",
// Econometric Reviews 23(1), with the correction of Patton, Politis and
// White (2009), Econometric Reviews 28(4), to the stationary bootstrap's
// constant:
//
//	b_SB = (2·Ĝ² / D̂_SB)^{1/3} · n^{1/3},  D̂_SB = 2·ĝ²
//	b_CB = (2·Ĝ² / D̂_CB)^{1/3} · n^{1/3},  D̂_CB = (4/3)·ĝ²
//	Ĝ = Σ_{|k|≤M} λ(k/M)·|k|·R̂(k),  ĝ = Σ_{|k|≤M} λ(k/M)·R̂(k)
//
// with the autocovariances R̂(k) = Σ_{t<n−k} (x_t − x̄)(x_{t+k} − x̄)/n,
// the flat-top window λ(s) = 1 for |s| < 1/2 and 2(1 − |s|) for
// 1/2 ≤ |s| ≤ 1 (Politis and Romano 1995), and the bandwidth M = 2·m̂
// where m̂ is the first lag j ≥ 1 from which K_N = 5 autocorrelations
// ρ̂(j) … ρ̂(j+K_N−1) are all within ±2·√(log10 n / n) (the largest lag
// outside it when no such run exists), as in Patton's reference code
// (opt_block_length_REV_dec07); K_N = max(5, √log10 n) is 5 for every
// n below 10^25. M is at most m_max = ⌈√n⌉ + K_N and both lengths lie in
// [1, ⌈min(3√n, n/3)⌉]. For an AR(1) series with coefficient φ,
// Ĝ/ĝ → 2φ/(1 − φ²), so b_SB → (2φ/(1 − φ²))^{2/3}·n^{1/3}.
//
// The stationary length need not be an integer; the circular bootstrap
// uses ⌈b_CB⌉. A constant series has length 1.
func OptimalBlockLength(x []float64) (stationary, circular float64, err error) {
	n := len(x)
	if n < MinBars {
		return 0, 0, inputErr("series: %d values, an automatic block length needs at least %d", n, MinBars)
	}
	if err := checkFinite("series", x); err != nil {
		return 0, 0, err
	}
	const kN, c = 5, 2.0
	nf := float64(n)
	mMax := min(int(math.Ceil(math.Sqrt(nf)))+kN, n-1)
	bMax := math.Ceil(min(3*math.Sqrt(nf), nf/3))

	mean := Mean(x)
	d := make([]float64, n)
	for i, v := range x {
		d[i] = v - mean
	}
	// acov[k] is R̂(k), computed only as far as the search needs it: for
	// returns with little autocorrelation that is a handful of lags, not
	// m_max (the whole cost is O(n·M)).
	acov := make([]float64, 0, mMax+1)
	at := func(k int) float64 {
		for len(acov) <= k {
			j := len(acov)
			s := 0.0
			for t := 0; t+j < n; t++ {
				s += d[t] * d[t+j]
			}
			acov = append(acov, s/nf)
		}
		return acov[k]
	}
	r0 := at(0)
	if !(r0 > 0) {
		return 1, 1, nil
	}
	band := c * math.Sqrt(math.Log10(nf)/nf)
	insignificant := func(k int) bool { return math.Abs(at(k)/r0) < band }

	mHat := 0
	for j := 1; j+kN-1 <= mMax && mHat == 0; j++ {
		run := true
		for k := j; k < j+kN; k++ {
			if !insignificant(k) {
				run = false
				j = k // no run can start at or before k
				break
			}
		}
		if run {
			mHat = j
		}
	}
	if mHat == 0 {
		for k := mMax; k >= 1; k-- {
			if !insignificant(k) {
				mHat = k
				break
			}
		}
	}
	m := max(1, min(2*mHat, mMax))

	var bigG, g float64
	g = r0
	for k := 1; k <= m; k++ {
		s := float64(k) / float64(m)
		lam := 1.0
		if s >= 0.5 {
			lam = 2 * (1 - s)
		}
		bigG += 2 * lam * float64(k) * at(k)
		g += 2 * lam * at(k)
	}
	length := func(dConst float64) float64 {
		if bigG == 0 {
			return 1
		}
		if dConst == 0 {
			return bMax
		}
		return min(max(math.Cbrt(2*bigG*bigG/dConst)*math.Cbrt(nf), 1), bMax)
	}
	return length(2 * g * g), length(4.0 / 3.0 * g * g), nil
}
