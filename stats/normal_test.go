package stats_test

import (
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// TestNormCDFMatchesAnIndependentErfc compares Φ with values from
// Python's math.erfc (the C library's), 0.5·erfc(−x/√2), in both tails.
func TestNormCDFMatchesAnIndependentErfc(t *testing.T) {
	cases := []struct{ x, want float64 }{
		{-37.5, 4.605353009582584e-308},
		{-10, 7.619853024160593e-24},
		{-5, 2.866515718791946e-07},
		{-1.96, 0.024997895148220435},
		{0, 0.5},
		{1.2838160365336546, 0.9003968344493904},
		{3, 0.9986501019683699},
		{8, 0.9999999999999993},
	}
	for _, c := range cases {
		if got := stats.NormCDF(c.x); !near(got, c.want, 4e-15*c.want) {
			t.Errorf("NormCDF(%v) = %.17g, want %.17g", c.x, got, c.want)
		}
	}
}

// TestNormQuantileMatchesAS241 compares Φ⁻¹ with Wichura's algorithm
// AS 241 (Python's statistics.NormalDist().inv_cdf), an implementation
// that shares nothing with math.Erfinv, from p = 1e-300 to 1 − 2⁻⁵³.
func TestNormQuantileMatchesAS241(t *testing.T) {
	cases := []struct{ p, want float64 }{
		{1e-300, -37.0470962993612},
		{1e-100, -21.27345356096532},
		{1e-20, -9.262340089798405},
		{1e-12, -7.034483825301132},
		{1e-06, -4.753424308822899},
		{0.001, -3.090232306167813},
		{0.01, -2.3263478740408408},
		{0.025, -1.9599639845400538},
		{0.1, -1.2815515655446008},
		{0.3, -0.5244005127080407},
		{0.5, 0},
		{0.7, 0.5244005127080407},
		{0.975, 1.9599639845400536},
		{0.99, 2.3263478740408408},
		{0.999999, 4.753424308817089},
		{1 - 1e-12, 7.0344869100478356},
		{1 - 0x1p-53, 8.209536151601386},
	}
	for _, c := range cases {
		if got := stats.NormQuantile(c.p); !near(got, c.want, 2e-15*max(1, math.Abs(c.want))) {
			t.Errorf("NormQuantile(%v) = %.17g, want %.17g (AS 241)", c.p, got, c.want)
		}
	}
	for _, c := range []struct{ p, want float64 }{{0, math.Inf(-1)}, {1, math.Inf(1)}} {
		if got := stats.NormQuantile(c.p); got != c.want {
			t.Errorf("NormQuantile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	for _, p := range []float64{-0.1, 1.1, math.NaN()} {
		if got := stats.NormQuantile(p); !math.IsNaN(got) {
			t.Errorf("NormQuantile(%v) = %v, want NaN", p, got)
		}
	}
}

// TestNormQuantileInvertsNormCDF checks Φ(Φ⁻¹(p)) = p in both tails over
// a log-spaced grid of p down to 1e-250, to the precision the problem
// allows: an error δz of an ulp or so in z moves Φ by a relative
// |z|·δz ≈ ε·z², so the bound is 8ε·max(1, z²) relative.
func TestNormQuantileInvertsNormCDF(t *testing.T) {
	for e := -250.0; e <= 0; e += 0.37 {
		p := 0.5 * math.Pow(10, e)
		z := stats.NormQuantile(p)
		tol := func(z float64) float64 { return 8 * 0x1p-52 * max(1, z*z) }
		if got := stats.NormCDF(z); !near(got, p, tol(z)*p) {
			t.Errorf("Φ(Φ⁻¹(%g)) = %g, relative error %.2g", p, got, got/p-1)
		}
		// The upper tail: for p' = 1 − p rounded, the tail 1 − p' is exact
		// (Sterbenz), and Φ(−Φ⁻¹(p')) must be it.
		hi := 1 - p
		if tail := 1 - hi; tail > 0 {
			zh := stats.NormQuantile(hi)
			if got := stats.NormCDF(-zh); !near(got, tail, tol(zh)*tail) {
				t.Errorf("1 − Φ(Φ⁻¹(%.17g)) = %g, want %g", hi, got, tail)
			}
		}
	}
}
