package stats_test

import (
	"math"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// bisectQuantile is Φ⁻¹(p) found by bisection on 0.5·erfc(−z/√2): a
// reference that shares nothing with stats.NormQuantile's erfinv start
// and Newton steps.
func bisectQuantile(p float64) float64 {
	lo, hi := -40.0, 40.0
	for range 200 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(-mid/math.Sqrt2) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// TestDeflatedSharpeOfThePapersExample reproduces the numerical example of
// Bailey and López de Prado (2014), "The Deflated Sharpe Ratio", as it is
// widely reproduced (the paper itself could not be fetched here): a
// strategy with annualised Sharpe ratio 2.5 estimated on n = 1250 daily
// returns, skewness γ3 = −3, kurtosis γ4 = 10, selected among N = 100
// trials whose annualised Sharpe ratios have variance V = 0.5, with 250
// days a year. Source values: SR0 ≈ 0.1132 a day and DSR ≈ 0.9004. (The
// annualised SR0 is sometimes quoted as ≈ 1.80; 0.1132·√250 is 1.79.)
//
// Worked by hand (Φ⁻¹ from a normal table):
//
//	SR  = 2.5/√250 = 0.1581139 a day;  V = 0.5/250 = 0.002,  √V = 0.04472136
//	Φ⁻¹(1 − 1/100)       = Φ⁻¹(0.99)      = 2.3263479
//	Φ⁻¹(1 − 1/(100·e))   = Φ⁻¹(0.9963212) = 2.6802104
//	SR0 = 0.04472136·(0.4227843·2.3263479 + 0.5772157·2.6802104)
//	    = 0.04472136·(0.9835435 + 1.5470594) = 0.04472136·2.5306029 = 0.1131720
//	bracket = 1 − (−3)·0.1581139 + (10 − 1)/4·0.025 = 1.5305916   (SR² = 6.25/250 = 0.025)
//	z = (0.1581139 − 0.1131720)·√1249/√1.5305916 = 0.0449419·35.341194/1.2371708 = 1.2838160
//	DSR = Φ(1.2838160) = 0.9003968
//
// The test recomputes the chain in float64 with quantiles found by
// bisection (bisectQuantile) and checks the package against both.
func TestDeflatedSharpeOfThePapersExample(t *testing.T) {
	const days = 250.0
	e := stats.SharpeEstimate{N: 1250, SR: 2.5 / math.Sqrt(days), Skew: -3, Kurt: 10}
	trialVar := 0.5 / days

	// The independent float64 chain.
	z1, z2 := bisectQuantile(1-1.0/100), bisectQuantile(1-1/(100*math.E))
	sr0Ref := math.Sqrt(trialVar) * ((1-stats.EulerGamma)*z1 + stats.EulerGamma*z2)
	bracket := 1 - e.Skew*e.SR + (e.Kurt-1)/4*e.SR*e.SR
	zRef := (e.SR - sr0Ref) * math.Sqrt(float64(e.N-1)) / math.Sqrt(bracket)
	dsrRef := 0.5 * math.Erfc(-zRef/math.Sqrt2)
	for _, c := range []struct {
		name          string
		got, hand, to float64
	}{
		{"Φ⁻¹(0.99)", z1, 2.3263479, 1e-7},
		{"Φ⁻¹(1 − 1/(100e))", z2, 2.6802104, 1e-7},
		{"bracket", bracket, 1.5305916, 1e-7},
		{"z", zRef, 1.2838160, 1e-7},
	} {
		if !near(c.got, c.hand, c.to) {
			t.Fatalf("reference chain: %s = %.9f, hand-worked %.7f", c.name, c.got, c.hand)
		}
	}

	sr0, err := stats.ExpectedMaxSharpe(100, trialVar)
	if err != nil {
		t.Fatal(err)
	}
	dsr, err := e.Deflated(100, trialVar)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SR0 %.7f a day (%.4f annualised), DSR %.7f", sr0, sr0*math.Sqrt(days), dsr)
	if !near(sr0, sr0Ref, 1e-15) || !near(sr0, 0.1131720, 5e-8) || math.Abs(sr0-0.1132) > 5e-5 {
		t.Errorf("SR0 = %.10f, want the float64 chain's %.10f, the hand-worked 0.1131720 and the source's 0.1132", sr0, sr0Ref)
	}
	if !near(dsr, dsrRef, 1e-14) || !near(dsr, 0.9003968, 5e-8) || math.Abs(dsr-0.9004) > 5e-5 {
		t.Errorf("DSR = %.10f, want the float64 chain's %.10f, the hand-worked 0.9003968 and the source's 0.9004", dsr, dsrRef)
	}
}

// TestPSRHandWorked: SR = 0.1 a bar on n = 101 normal returns (γ3 = 0,
// γ4 = 3) against SR* = 0: z = 0.1·√100/√(1 + 0.01/2) = 1/√1.005 =
// 0.99750934, Φ(z) = 0.84074133 (Python: NormalDist().cdf). Against
// SR* = SR the PSR is exactly 1/2, whatever the moments.
func TestPSRHandWorked(t *testing.T) {
	e := stats.SharpeEstimate{N: 101, SR: 0.1, Skew: 0, Kurt: 3}
	got, err := e.PSR(0)
	if err != nil {
		t.Fatal(err)
	}
	if !near(got, 0.8407413278013518, 1e-15) {
		t.Errorf("PSR(0) = %.17g, want 0.8407413278013518", got)
	}
	skewed := stats.SharpeEstimate{N: 40, SR: 0.3, Skew: -1.5, Kurt: 8}
	if got, _ := skewed.PSR(0.3); got != 0.5 {
		t.Errorf("PSR(SR) = %v, want 0.5", got)
	}
	// Negative skewness and fat tails lower the confidence in a positive
	// Sharpe ratio.
	if a, _ := skewed.PSR(0); a >= mustPSR(t, stats.SharpeEstimate{N: 40, SR: 0.3, Skew: 0, Kurt: 3}, 0) {
		t.Errorf("PSR with γ3 = −1.5, γ4 = 8 is %v: not below the normal case's", a)
	}
}

func mustPSR(t *testing.T, e stats.SharpeEstimate, bench float64) float64 {
	t.Helper()
	p, err := e.PSR(bench)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPSROfTheTrueSharpeIsUniform: for the true Sharpe ratio SR*, PSR(SR*)
// is the probability integral transform of the sample Sharpe ratio, so
// over many samples it is about uniform on (0, 1). Over 4000 samples of
// 250 returns (normal, and exponential with γ3 = 2, γ4 = 9, each with
// estimated moments), the share below 0.95 (a one-sided 95 % test that
// wrongly rejects the truth) must be 0.95 within ±0.015, the share in
// [0.025, 0.975] 0.95 within ±0.015 (the Monte-Carlo standard error is
// 0.0034), and the Kolmogorov–Smirnov distance to the uniform below 0.03
// (its 1 % critical value for 4000 draws is 0.026).
func TestPSROfTheTrueSharpeIsUniform(t *testing.T) {
	const trials, n, sr = 4000, 250, 0.1
	for _, dist := range []string{"normal", "exponential"} {
		t.Run(dist, func(t *testing.T) {
			rng := newRNG(3)
			r := make([]float64, n)
			psr := make([]float64, trials)
			for i := range psr {
				for j := range r {
					if dist == "normal" {
						r[j] = sr + rng.NormFloat64()
					} else {
						r[j] = sr + rng.ExpFloat64() - 1
					}
				}
				e, err := stats.EstimateSharpe(r)
				if err != nil {
					t.Fatal(err)
				}
				psr[i] = mustPSR(t, e, sr)
			}
			slices.Sort(psr)
			below95, central := 0, 0
			ks := 0.0
			for i, p := range psr {
				if p <= 0.95 {
					below95++
				}
				if p >= 0.025 && p <= 0.975 {
					central++
				}
				ks = max(ks, math.Abs(p-float64(i)/trials), math.Abs(p-float64(i+1)/trials))
			}
			b, cov := float64(below95)/trials, float64(central)/trials
			t.Logf("share below 0.95: %.4f; in [0.025, 0.975]: %.4f; KS distance %.4f", b, cov, ks)
			if !near(b, 0.95, 0.015) || !near(cov, 0.95, 0.015) || ks > 0.03 {
				t.Errorf("PSR of the true Sharpe ratio is not uniform: %.4f below 0.95, %.4f central, KS %.4f", b, cov, ks)
			}
		})
	}
}

// TestExpectedMaxSharpeApproximatesTheMaximumOfNormals compares SR0 with
// the exact expected maximum of N standard normal draws,
// ∫ x·N·φ(x)·Φ(x)^{N−1} dx, computed by numerical integration in Python
// (1.5387527 for N = 10, 2.5075936 for 100, 3.2414358 for 1000): the
// false strategy theorem's approximation is within 2.5 % of it, and its
// own value for N = 100 is 2.5306029 (worked in the DSR example above).
func TestExpectedMaxSharpeApproximatesTheMaximumOfNormals(t *testing.T) {
	for _, c := range []struct {
		trials        int
		exact, approx float64
	}{{10, 1.5387527, 1.5745983}, {100, 2.5075936, 2.5306029}, {1000, 3.2414358, 3.2551215}} {
		got, err := stats.ExpectedMaxSharpe(c.trials, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !near(got, c.approx, 1e-7) || math.Abs(got/c.exact-1) > 0.025 {
			t.Errorf("N = %d: SR0 = %.7f, want %.7f, within 2.5 %% of the exact %.7f", c.trials, got, c.approx, c.exact)
		}
		// SR0 scales with the standard deviation of the trials.
		if s, _ := stats.ExpectedMaxSharpe(c.trials, 4); !near(s, 2*got, 1e-15) {
			t.Errorf("N = %d: SR0 with variance 4 is %v, want twice %v", c.trials, s, got)
		}
	}
	if s, err := stats.ExpectedMaxSharpe(1, 0.3); err != nil || s != 0 {
		t.Errorf("one trial: SR0 = %v, %v; want 0 (no selection)", s, err)
	}
	// More trials, lower deflated Sharpe ratio.
	e := stats.SharpeEstimate{N: 1000, SR: 0.08, Skew: -0.5, Kurt: 5}
	prev := 1.0
	for _, n := range []int{1, 2, 10, 100, 1000, 10000} {
		d, err := e.Deflated(n, 0.0005)
		if err != nil {
			t.Fatal(err)
		}
		if d >= prev {
			t.Errorf("DSR with %d trials is %v, not below %v with fewer", n, d, prev)
		}
		prev = d
	}
}

func TestDeflatedRejectsBadInput(t *testing.T) {
	good := stats.SharpeEstimate{N: 100, SR: 0.1, Skew: 0, Kurt: 3}
	cases := []struct {
		name  string
		e     stats.SharpeEstimate
		n     int
		v     float64
		parts []string
	}{
		{"no trials", good, 0, 0.001, []string{"trials = 0", "N ≥ 1"}},
		{"negative variance", good, 10, -1, []string{"variance", "-1", "≥ 0"}},
		{"NaN variance", good, 10, math.NaN(), []string{"variance", "NaN"}},
		{"one return", stats.SharpeEstimate{N: 1, SR: 0.1, Kurt: 3}, 10, 0.001, []string{"n = 1", "at least 2"}},
		{"excess kurtosis given", stats.SharpeEstimate{N: 100, SR: 0.1, Skew: 0, Kurt: 0}, 10, 0.001, []string{"kurtosis 0", "not excess"}},
		{"impossible moments", stats.SharpeEstimate{N: 100, SR: 0.1, Skew: 2, Kurt: 4}, 10, 0.001, []string{"kurtosis 4 < 1 + skewness² = 5"}},
		{"NaN Sharpe", stats.SharpeEstimate{N: 100, SR: math.NaN(), Kurt: 3}, 10, 0.001, []string{"sharpe is NaN"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.e.Deflated(c.n, c.v)
			wantInputErr(t, err, c.parts...)
		})
	}
	_, err := good.PSR(math.Inf(1))
	wantInputErr(t, err, "benchmark", "+Inf")
}
