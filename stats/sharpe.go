package stats

import "math"

// Sharpe is the per-bar Sharpe ratio with a zero risk-free rate,
// mean(r)/std(r) with the sample standard deviation (StdDev); 0 when
// std(r) = 0 (a flat or constant series) or r has fewer than two values.
// It is the project's definition: sim.Sharpe is
// Annualise(Sharpe(r), barsPerYear), bit for bit.
func Sharpe(r []float64) float64 {
	m, sd := meanStdDev(r)
	if sd == 0 {
		return 0
	}
	return m / sd
}

// Annualise turns a per-bar Sharpe ratio into an annual one,
// sr × √barsPerYear; 0 when barsPerYear is not positive (the data's bars
// per year are unknown), as sim.Sharpe.
func Annualise(sr, barsPerYear float64) float64 {
	return sr * annualFactor(barsPerYear)
}

// annualFactor is √barsPerYear, or 0 when barsPerYear is not positive.
func annualFactor(barsPerYear float64) float64 {
	if !(barsPerYear > 0) {
		return 0
	}
	return math.Sqrt(barsPerYear)
}

// SharpeEstimate is what one return series says about its Sharpe ratio:
// the per-bar point estimate and the sample moments its sampling
// distribution depends on. EstimateSharpe fills it from returns; a caller
// that has only the summary (a paper's example, another tool's report)
// fills the fields itself.
type SharpeEstimate struct {
	N    int     `json:"n"`        // returns
	SR   float64 `json:"sharpe"`   // per-bar Sharpe ratio, Sharpe(r)
	Skew float64 `json:"skewness"` // γ3 = m3/m2^{3/2}
	Kurt float64 `json:"kurtosis"` // γ4 = m4/m2², not excess (3 for normal returns)
}

// EstimateSharpe measures r: n, the per-bar Sharpe ratio and the skewness
// and kurtosis from the central moments m_k = Σ(r − r̄)^k / n. It needs at
// least two finite returns that are not all equal: a constant series has
// Sharpe ratio 0 by definition (Sharpe), but no sampling distribution to
// test it against.
func EstimateSharpe(r []float64) (SharpeEstimate, error) {
	if len(r) < 2 {
		return SharpeEstimate{}, inputErr("returns: %d values, a Sharpe ratio needs at least 2", len(r))
	}
	if err := checkFinite("returns", r); err != nil {
		return SharpeEstimate{}, err
	}
	skew, kurt, ok := moments(r)
	if !ok {
		return SharpeEstimate{}, inputErr("returns: all %d values equal %v: zero variance, so the Sharpe ratio has no distribution to test", len(r), r[0])
	}
	return SharpeEstimate{N: len(r), SR: Sharpe(r), Skew: skew, Kurt: kurt}, nil
}

// TStat is the t-statistic of the Sharpe ratio, SR·√n: about standard
// normal for returns of zero mean (it is the t-statistic of the mean
// with the sample standard deviation), before any choosing among trials.
func (e SharpeEstimate) TStat() float64 {
	return e.SR * math.Sqrt(float64(e.N))
}

// Annual is the annualised Sharpe ratio, Annualise(e.SR, barsPerYear).
func (e SharpeEstimate) Annual(barsPerYear float64) float64 {
	return Annualise(e.SR, barsPerYear)
}

// StdErr is the standard error of the per-bar Sharpe ratio under
// non-normal iid returns (Mertens 2002, "Comments on variance of the IID
// estimator in Lo (2002)"; Lo 2002, "The Statistics of Sharpe Ratios",
// Financial Analysts Journal 58(4), for normal returns):
//
//	Var(SR) ≈ (1 − γ3·SR + (γ4 − 1)/4·SR²) / n
//
// which for normal returns (γ3 = 0, γ4 = 3) is Lo's (1 + SR²/2)/n.
// Negative skewness and fat tails widen it. It is NaN when the bracket is
// negative, which no real distribution gives (γ4 ≥ 1 + γ3², so the
// bracket is at least (1 − γ3·SR/2)²), or when N < 1.
func (e SharpeEstimate) StdErr() float64 {
	if e.N < 1 {
		return math.NaN()
	}
	return math.Sqrt(e.bracket() / float64(e.N))
}

// bracket is 1 − γ3·SR + (γ4 − 1)/4·SR², the factor by which skewness
// and kurtosis scale the variance of the Sharpe ratio.
func (e SharpeEstimate) bracket() float64 {
	return 1 - e.Skew*e.SR + (e.Kurt-1)/4*e.SR*e.SR
}

// validate checks what the probabilistic Sharpe ratio needs: n ≥ 2,
// finite moments with γ4 ≥ 1 + γ3² (Pearson's inequality, which every
// distribution satisfies), and so a positive bracket.
func (e SharpeEstimate) validate() error {
	if e.N < 2 {
		return inputErr("estimate: n = %d, needs at least 2 returns", e.N)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"sharpe", e.SR}, {"skewness", e.Skew}, {"kurtosis", e.Kurt}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return inputErr("estimate: %s is %v, must be finite", f.name, f.v)
		}
	}
	if e.Kurt < 1+e.Skew*e.Skew {
		return inputErr("estimate: kurtosis %v < 1 + skewness² = %v: no distribution has these moments (kurtosis is not excess kurtosis here: 3 for normal returns)",
			e.Kurt, 1+e.Skew*e.Skew)
	}
	if !(e.bracket() > 0) {
		return inputErr("estimate: 1 − γ3·SR + (γ4−1)/4·SR² = %v with SR %v, skewness %v, kurtosis %v: the Sharpe ratio's variance must be positive",
			e.bracket(), e.SR, e.Skew, e.Kurt)
	}
	return nil
}
