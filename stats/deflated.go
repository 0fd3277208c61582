package stats

import "math"

// EulerGamma is the Euler–Mascheroni constant γ, which enters the
// expected maximum of N normal draws (ExpectedMaxSharpe).
const EulerGamma = 0.57721566490153286060651209008240243

// PSR is the probabilistic Sharpe ratio of Bailey and López de Prado
// ("The Sharpe Ratio Efficient Frontier", Journal of Risk 15(2), 2012;
// restated in "The Deflated Sharpe Ratio", 2014, eq. 2): the probability
// that the true per-bar Sharpe ratio exceeds the benchmark SR*, given the
// estimate's n, skewness γ3 and kurtosis γ4,
//
//	PSR(SR*) = Φ( (SR − SR*)·√(n − 1) / √(1 − γ3·SR + (γ4 − 1)/4·SR²) )
//
// SR and SR* are per bar (annualise neither). PSR(0) near 1 says the
// Sharpe ratio is positive beyond doubt for one strategy tried alone.
func (e SharpeEstimate) PSR(benchmark float64) (float64, error) {
	if err := e.validate(); err != nil {
		return 0, err
	}
	if math.IsNaN(benchmark) || math.IsInf(benchmark, 0) {
		return 0, inputErr("benchmark Sharpe ratio is %v, must be finite", benchmark)
	}
	z := (e.SR - benchmark) * math.Sqrt(float64(e.N-1)) / math.Sqrt(e.bracket())
	return NormCDF(z), nil
}

// ExpectedMaxSharpe is the Sharpe ratio that the best of N independent
// trials without skill is expected to show (Bailey and López de Prado
// 2014, eq. 1: the expected maximum of N normal draws of that variance):
//
//	SR0 = √V[SR_n] · ( (1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e)) )
//
// with γ the Euler–Mascheroni constant and V[SR_n] the variance of the
// trials' Sharpe ratios (per bar when the estimate is per bar). One trial
// involves no selection: SR0 is 0, and the deflated Sharpe ratio is PSR(0).
func ExpectedMaxSharpe(trials int, trialVar float64) (float64, error) {
	if trials < 1 {
		return 0, inputErr("trials = %d: at least the reported configuration was tried, so N ≥ 1", trials)
	}
	if math.IsNaN(trialVar) || math.IsInf(trialVar, 0) || trialVar < 0 {
		return 0, inputErr("variance of the trials' Sharpe ratios is %v: must be finite and ≥ 0", trialVar)
	}
	if trials == 1 {
		return 0, nil
	}
	n := float64(trials)
	return math.Sqrt(trialVar) * ((1-EulerGamma)*NormQuantile(1-1/n) + EulerGamma*NormQuantile(1-1/(n*math.E))), nil
}

// Deflated is the deflated Sharpe ratio (Bailey and López de Prado 2014,
// "The Deflated Sharpe Ratio: Correcting for Selection Bias, Backtest
// Overfitting and Non-Normality", Journal of Portfolio Management 40(5)):
// DSR = PSR(SR0), with SR0 = ExpectedMaxSharpe(trials, trialVar), the
// probability that the selected strategy's true Sharpe ratio is above
// what the best of the trials would show by luck alone. trials is the
// number of configurations tried (recorded in the run's metadata), and
// trialVar the variance of their per-bar Sharpe ratios.
func (e SharpeEstimate) Deflated(trials int, trialVar float64) (float64, error) {
	sr0, err := ExpectedMaxSharpe(trials, trialVar)
	if err != nil {
		return 0, err
	}
	return e.PSR(sr0)
}
