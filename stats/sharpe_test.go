package stats_test

import (
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/stats"
)

// TestSharpeEstimateOfHandWorkedSeries checks every field against values
// worked by hand (and recomputed with Python's float64 arithmetic).
func TestSharpeEstimateOfHandWorkedSeries(t *testing.T) {
	cases := []struct {
		name                       string
		r                          []float64
		sr, skew, kurt, se, annual float64
	}{
		// r = 0.01, −0.02, 0.03, 0: mean 0.005, deviations ±0.005, ±0.025,
		// Σd² = 1.3e-3, sample std √(1.3e-3/3) = 0.0208167, SR = 0.2401922;
		// m3 = 0 (the deviations are symmetric); m2 = 3.25e-4,
		// m4 = (2·0.005⁴ + 2·0.025⁴)/4 = 1.95625e-7, γ4 = m4/m2² = 1.8520710;
		// SE = √((1 + 0.8520710/4·SR²)/4) = 0.5030630; annual ×√252.
		{"symmetric", []float64{0.01, -0.02, 0.03, 0}, 0.24019223070763063, 0, 1.852071005917159, 0.5030629895108233, 3.812933455813454},
		// r = 0, 0, 0, 1 is a Bernoulli(1/4) sample: mean 1/4, sample
		// variance 0.75/3 = 1/4, SR = 0.5; skewness (1 − 2p)/√(p(1 − p)) =
		// 2/√3, kurtosis (1 − 3p + 3p²)/(p(1 − p)) = 7/3;
		// SE = √((1 − (2/√3)/2 + (4/3)/16)/4) = 0.3556624.
		{"bernoulli", []float64{0, 0, 0, 1}, 0.5, 2 / math.Sqrt(3), 7.0 / 3, 0.35566243270259357, 7.937253933193772},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := stats.EstimateSharpe(c.r)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{
				{"SR", e.SR, c.sr}, {"skewness", e.Skew, c.skew}, {"kurtosis", e.Kurt, c.kurt},
				{"StdErr", e.StdErr(), c.se}, {"Annual(252)", e.Annual(252), c.annual},
				{"TStat", e.TStat(), c.sr * 2},
			} {
				if !near(f.got, f.want, 1e-14*max(1, math.Abs(f.want))) {
					t.Errorf("%s = %.17g, want %.17g", f.name, f.got, f.want)
				}
			}
			if e.N != len(c.r) {
				t.Errorf("N = %d, want %d", e.N, len(c.r))
			}
		})
	}
}

// referenceSharpe is the annualised Sharpe ratio as sim.Sharpe defined
// it before this package existed, written out independently of it: the
// mean Σr/n, the sample standard deviation √(Σ(r − mean)²/(n − 1)) in a
// second pass, mean/std × √barsPerYear; 0 when std is 0 or n < 2, and ×0
// when barsPerYear is not positive.
func referenceSharpe(r []float64, barsPerYear float64) float64 {
	if len(r) < 2 {
		return 0
	}
	m := 0.0
	for _, v := range r {
		m += v
	}
	m /= float64(len(r))
	ss := 0.0
	for _, v := range r {
		ss += (v - m) * (v - m)
	}
	sd := math.Sqrt(ss / float64(len(r)-1))
	if sd == 0 {
		return 0
	}
	f := 0.0
	if barsPerYear > 0 {
		f = math.Sqrt(barsPerYear)
	}
	return m / sd * f
}

// TestSharpeIsMarketSharpeBitForBit checks that the annualised Sharpe
// ratio of this package, and sim.Sharpe (which every report prints and
// which calls it), are the project's definition (referenceSharpe) to the
// last bit, over random series of several scales and signs, and over the
// edge cases market defines: no or one return, a constant series, bars
// per year unknown (0) or invalid.
func TestSharpeIsMarketSharpeBitForBit(t *testing.T) {
	rng := newRNG(1)
	var series [][]float64
	for _, n := range []int{2, 3, 10, 251, 1000, 100_000} {
		for _, scale := range []float64{1e-5, 0.01, 3} {
			r := make([]float64, n)
			drift := (rng.Float64() - 0.5) * scale
			for i := range r {
				r[i] = drift + scale*rng.NormFloat64()
			}
			series = append(series, r)
		}
	}
	series = append(series, nil, []float64{0.01}, []float64{0.002, 0.002, 0.002}, make([]float64, 50), []float64{-0.01, -0.03})
	for i, r := range series {
		for _, bpy := range []float64{252, 8760, 98280, 1, 0, -5, math.NaN()} {
			got := stats.Annualise(stats.Sharpe(r), bpy)
			mkt := sim.Sharpe(r, bpy)
			want := referenceSharpe(r, bpy)
			if math.Float64bits(got) != math.Float64bits(want) || math.Float64bits(mkt) != math.Float64bits(want) {
				t.Fatalf("series %d (n %d), bars per year %v: stats %.17g, market %.17g, reference %.17g", i, len(r), bpy, got, mkt, want)
			}
		}
	}
}

// TestStdErrMatchesTheSpreadOfSimulatedSharpeRatios checks Mertens'
// formula where it matters: returns r = μ + σ·(X − 1) with X ~ Exp(1)
// have skewness 2 and kurtosis 9, and a true Sharpe ratio μ/σ = 0.1. Over
// 4000 samples of 2000 returns the standard deviation of the sample
// Sharpe ratio must match √((1 − 2·0.1 + 8/4·0.01)/2000) = 0.020248 within
// 3 % (the Monte-Carlo error of a standard deviation from 4000 draws is
// about 1.1 %; the formula's own small-sample error, measured with 20000
// draws, is +1.8 % at n = 250, +1.1 % at 500 and +0.1 % at 2000), and must
// not match Lo's normal formula √((1 + 0.01/2)/2000) = 0.022416, 10.7 %
// above it.
func TestStdErrMatchesTheSpreadOfSimulatedSharpeRatios(t *testing.T) {
	const trials, n, sr = 4000, 2000, 0.1
	rng := newRNG(2)
	r := make([]float64, n)
	srs := make([]float64, trials)
	for i := range srs {
		for j := range r {
			r[j] = sr + (rng.ExpFloat64() - 1)
		}
		srs[i] = stats.Sharpe(r)
	}
	got := stats.StdDev(srs)
	mertens := stats.SharpeEstimate{N: n, SR: sr, Skew: 2, Kurt: 9}.StdErr()
	lo := stats.SharpeEstimate{N: n, SR: sr, Skew: 0, Kurt: 3}.StdErr()
	if !near(mertens, math.Sqrt(0.82/2000), 1e-15) || !near(lo, math.Sqrt(1.005/2000), 1e-15) {
		t.Fatalf("StdErr: Mertens %v, Lo %v; want %v and %v", mertens, lo, math.Sqrt(0.82/2000), math.Sqrt(1.005/2000))
	}
	t.Logf("simulated std of SR %.6f; Mertens %.6f (%.2f %% off), normal %.6f", got, mertens, 100*(got/mertens-1), lo)
	if math.Abs(got/mertens-1) > 0.03 {
		t.Errorf("simulated std %.6f is more than 3 %% from Mertens' %.6f", got, mertens)
	}
	if math.Abs(got/lo-1) < 0.05 {
		t.Errorf("simulated std %.6f is within 5 %% of the normal formula's %.6f: the test cannot tell the two apart", got, lo)
	}
}

func TestEstimateSharpeRejectsBadInput(t *testing.T) {
	cases := []struct {
		name  string
		r     []float64
		parts []string
	}{
		{"NaN", []float64{0.01, 0.02, 0.03, math.NaN(), 0}, []string{"returns[3]", "NaN", "finite"}},
		{"Inf", []float64{math.Inf(-1), 0.02}, []string{"returns[0]", "-Inf"}},
		{"one value", []float64{0.01}, []string{"returns", "1 values", "at least 2"}},
		{"constant", []float64{0.002, 0.002, 0.002}, []string{"returns", "all 3 values equal 0.002", "zero variance"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := stats.EstimateSharpe(c.r)
			wantInputErr(t, err, c.parts...)
		})
	}
}
