package stats_test

import (
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// TestBlockLengthOfAR1MatchesItsClosedForm: for an AR(1) series with
// coefficient φ the autocovariances are R(k) = σ²φ^|k|, so
// G = Σ|k|R(k) = 2σ²φ/(1 − φ)² and g = ΣR(k) = σ²(1 + φ)/(1 − φ), and the
// optimal lengths are b_SB = (G/g)^{2/3}·n^{1/3} = (2φ/(1 − φ²))^{2/3}·n^{1/3}
// and b_CB = (3/2)^{1/3}·b_SB. On 100 000 bars (4 seeds per φ) the
// estimate must be within 20 % of it each time and within 10 % on average
// (measured: 0.86 to 1.07 of it), and b_CB/b_SB must be (3/2)^{1/3}.
func TestBlockLengthOfAR1MatchesItsClosedForm(t *testing.T) {
	const n = 100_000
	for _, phi := range []float64{0.2, 0.5, 0.8} {
		want := math.Pow(2*phi/(1-phi*phi), 2.0/3) * math.Cbrt(n)
		sum := 0.0
		for seed := uint64(20); seed < 24; seed++ {
			sb, cb, err := stats.OptimalBlockLength(ar1(newRNG(seed), n, 0.01, phi, 1))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("φ %.1f seed %d: b_SB %.2f, b_CB %.2f; closed form %.2f", phi, seed, sb, cb, want)
			if math.Abs(sb/want-1) > 0.2 {
				t.Errorf("φ %.1f seed %d: b_SB %.2f is not within 20 %% of %.2f", phi, seed, sb, want)
			}
			if !near(cb/sb, math.Cbrt(1.5), 1e-12) {
				t.Errorf("φ %.1f seed %d: b_CB/b_SB = %v, want (3/2)^(1/3)", phi, seed, cb/sb)
			}
			sum += sb
		}
		if mean := sum / 4; math.Abs(mean/want-1) > 0.1 {
			t.Errorf("φ %.1f: mean b_SB %.2f is not within 10 %% of %.2f", phi, mean, want)
		}
	}
}

// TestBlockLengthOfWhiteNoiseIsShort: without dependence the optimal
// length tends to 1 (measured 1.0 to 3.1 on 1000 to 100 000 iid bars),
// and a constant series has length 1 exactly.
func TestBlockLengthOfWhiteNoiseIsShort(t *testing.T) {
	for seed := uint64(20); seed < 24; seed++ {
		for _, n := range []int{1000, 100_000} {
			sb, cb, err := stats.OptimalBlockLength(ar1(newRNG(seed), n, 0.01, 0, 1))
			if err != nil {
				t.Fatal(err)
			}
			if sb < 1 || cb < 1 || sb > 4 || cb > 4.6 {
				t.Errorf("iid, n %d, seed %d: b_SB %.2f, b_CB %.2f; want b_SB in [1, 4] and b_CB in [1, 4.6]", n, seed, sb, cb)
			}
		}
	}
	sb, cb, err := stats.OptimalBlockLength(make([]float64, 50))
	if err != nil || sb != 1 || cb != 1 {
		t.Errorf("constant series: %v, %v, %v; want 1, 1", sb, cb, err)
	}
}

// TestBlockLengthIsBounded: over-differenced noise x_t = u_t − u_{t−1}
// has a long-run variance g = R(0) + 2R(1) = 2 − 2 = 0, so the optimal
// length (2G²/D)^{1/3}·n^{1/3} with D ∝ g² is unbounded; the estimate must
// stop at ⌈min(3√n, n/3)⌉. A random walk asks for long blocks too and
// stays within the bound.
func TestBlockLengthIsBounded(t *testing.T) {
	for _, n := range []int{400, 10_000, 100_000} {
		rng := newRNG(5)
		bMax := math.Ceil(min(3*math.Sqrt(float64(n)), float64(n)/3))
		diff, walk := make([]float64, n), make([]float64, n)
		u := rng.NormFloat64()
		for i := range diff {
			next := rng.NormFloat64()
			diff[i], u = next-u, next
			if i > 0 {
				walk[i] = walk[i-1] + next
			}
		}
		sb, cb, err := stats.OptimalBlockLength(diff)
		if err != nil {
			t.Fatal(err)
		}
		if sb != bMax || cb != bMax {
			t.Errorf("over-differenced noise of %d: b_SB %v, b_CB %v; want the bound %v", n, sb, cb, bMax)
		}
		sb, cb, err = stats.OptimalBlockLength(walk)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("random walk of %d: b_SB %.2f, b_CB %.2f, bound %v", n, sb, cb, bMax)
		if sb > bMax || cb > bMax || sb < 1 || cb < 1 {
			t.Errorf("random walk of %d: b_SB %v, b_CB %v, outside [1, %v]", n, sb, cb, bMax)
		}
	}
}

func TestBlockLengthRejectsBadInput(t *testing.T) {
	_, _, err := stats.OptimalBlockLength(make([]float64, 9))
	wantInputErr(t, err, "series", "9 values", "at least 10")
	x := make([]float64, 20)
	x[17] = math.NaN()
	_, _, err = stats.OptimalBlockLength(x)
	wantInputErr(t, err, "series[17]", "NaN")
}
