package market

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dqnflow/dqnflow/prices"
)

// Parameters of the synthetic process (Synthetic documents the formulas).
const (
	// SyntheticLevel is the price level P₀ the series starts at and reverts to.
	SyntheticLevel = 1000.0
	// SyntheticPhi is φ, the lag-1 autocorrelation of close-to-close log
	// returns: the planted signal.
	SyntheticPhi = 0.35
	// SyntheticKappa is κ, the pull of the log price towards log P₀ per bar;
	// it keeps the level near P₀ (stationary sd of log(C/P₀) ≈ 0.1) without
	// a noticeable effect on a single bar.
	SyntheticKappa = 5e-4
	// SyntheticSigmaCalm and SyntheticSigmaVolatile are the innovation
	// standard deviations σ₀, σ₁ of the two volatility regimes.
	SyntheticSigmaCalm     = 0.002
	SyntheticSigmaVolatile = 0.004
	// SyntheticStayCalm and SyntheticStayVolatile are the probabilities of
	// staying in the regime from one bar to the next (mean regime lengths
	// 200 and 50 bars; the volatile regime holds 20% of the bars).
	SyntheticStayCalm     = 0.995
	SyntheticStayVolatile = 0.98
	// SyntheticThreshold is the oracle's entry threshold on the predicted
	// next log return. One fill with the synthetic series' default
	// instrument ("bps": 1 bp slippage + 0.5 bp commission) costs 1.5e-4
	// of the notional (2.75e-4 with the instrument of earlier versions,
	// 1 tick of 0.25 plus 0.62 commission at P₀); a threshold of 4e-4
	// keeps the expected gain of a position above the cost of turning it
	// over with either.
	SyntheticThreshold = 4e-4
)

// syntheticStart is the time of the first synthetic bar.
var syntheticStart = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Synthetic generates n hourly bars (no gaps, from 2020-01-01 00:00 UTC)
// with a planted, learnable signal, and the Oracle that knows it. The same
// seed gives the same bars, bit for bit (PCG seeded with seed).
//
// The process, for t = 0..n−1, with C₋₁ = P₀, r₋₁ = 0, x_t = log(C_t/P₀):
//
//	s_t ∈ {calm, volatile}: a Markov chain; P(stay) = 0.995 calm, 0.98 volatile;
//	                        s₀ drawn from the stationary distribution (80/20)
//	r_t = φ·r_{t−1} − κ·x_{t−1} + σ_{s_t}·ε_t,   ε_t ~ N(0, 1)
//	O_t = C_{t−1}                                 (no gaps)
//	C_t = O_t·exp(r_t)
//	H_t = max(O_t, C_t)·exp(σ_{s_t}·|u_t|/2),   L_t = min(O_t, C_t)·exp(−σ_{s_t}·|v_t|/2)
//	V_t = 1000·(σ_{s_t}/σ₀)·exp(0.25·w_t)        (volume rises with volatility)
//
// with φ = SyntheticPhi, κ = SyntheticKappa, σ₀ = SyntheticSigmaCalm,
// σ₁ = SyntheticSigmaVolatile and u, v, w independent N(0, 1). The
// per-bar return has sd ≈ σ̄/√(1−φ²) ≈ 0.27%. Because O_{t+1} = C_t, a
// position filled at the open of bar t+1 earns exactly r_{t+1}, whose
// conditional mean given bars ≤ t is φ·r_t − κ·x_t (Oracle.Predict).
func Synthetic(n int, seed uint64) (*prices.Bars, *Oracle, error) {
	return SyntheticSeries(n, seed, SyntheticPhi)
}

// SyntheticSeries is Synthetic with the planted autocorrelation φ = phi
// instead of SyntheticPhi: phi 0 is a series with no signal beyond the
// slow pull to P₀ (κ), where the oracle stays flat and an agent should
// too. The random draws are the same for every phi, so series of one seed
// differ only in the signal. phi must be in [0, 1).
func SyntheticSeries(n int, seed uint64, phi float64) (*prices.Bars, *Oracle, error) {
	if n < 2 {
		return nil, nil, fmt.Errorf("synthetic bars: n = %d, need at least 2", n)
	}
	if !(phi >= 0 && phi < 1) {
		return nil, nil, fmt.Errorf("synthetic bars: phi = %g, want [0, 1)", phi)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := &prices.Bars{
		Name: "synthetic", HasVolume: true,
		Time: make([]time.Time, n), Open: make([]float64, n), High: make([]float64, n),
		Low: make([]float64, n), Close: make([]float64, n), Volume: make([]float64, n),
	}
	sigma := [2]float64{SyntheticSigmaCalm, SyntheticSigmaVolatile}
	stay := [2]float64{SyntheticStayCalm, SyntheticStayVolatile}
	// Stationary probability of the volatile regime: (1−p₀)/((1−p₀)+(1−p₁)).
	pVolatile := (1 - stay[0]) / ((1 - stay[0]) + (1 - stay[1]))
	regime := 0
	if rng.Float64() < pVolatile {
		regime = 1
	}
	prevClose, prevRet := SyntheticLevel, 0.0
	for t := 0; t < n; t++ {
		if t > 0 && rng.Float64() >= stay[regime] {
			regime = 1 - regime
		}
		s := sigma[regime]
		x := math.Log(prevClose / SyntheticLevel)
		r := phi*prevRet - SyntheticKappa*x + s*rng.NormFloat64()
		open := prevClose
		closePrice := open * math.Exp(r)
		b.Time[t] = syntheticStart.Add(time.Duration(t) * time.Hour)
		b.Open[t] = open
		b.Close[t] = closePrice
		b.High[t] = max(open, closePrice) * math.Exp(s*math.Abs(rng.NormFloat64())/2)
		b.Low[t] = min(open, closePrice) * math.Exp(-s*math.Abs(rng.NormFloat64())/2)
		b.Volume[t] = 1000 * (s / sigma[0]) * math.Exp(0.25*rng.NormFloat64())
		prevClose, prevRet = closePrice, r
	}
	o := &Oracle{
		Phi: phi, Kappa: SyntheticKappa, Level: SyntheticLevel,
		Threshold: SyntheticThreshold, bars: b,
	}
	return b, o, nil
}

// Oracle is the causal optimal trader of a Synthetic series: it knows the
// generator's parameters and predicts the next bar's log return from bars
// ≤ t only. It implements sim.Policy for the bars it was generated with.
type Oracle struct {
	Phi, Kappa, Level float64
	// Threshold is the predicted |log return| below which the oracle stays
	// flat, because the expected gain would not pay the costs.
	Threshold float64
	bars      *prices.Bars
}

// Predict returns E[r_{t+1} | bars ≤ t] = φ·r_t − κ·log(C_t/P₀), where
// r_t = log(C_t/O_t) is bar t's close-to-close log return (O_t = C_{t−1}).
// It returns 0 for t outside the series.
func (o *Oracle) Predict(t int) float64 {
	if o == nil || o.bars == nil || t < 0 || t >= o.bars.Len() {
		return 0
	}
	b := o.bars
	return o.Phi*math.Log(b.Close[t]/b.Open[t]) - o.Kappa*math.Log(b.Close[t]/o.Level)
}

// Act implements sim.Policy: full size long when Predict(t) > Threshold, full
// size short when it is < −Threshold, flat otherwise; never a stop. obs is
// not used: the oracle reads bars ≤ t of its own series.
func (o *Oracle) Act(t int, obs []float32) Action {
	a := Action{Dir: 1, Size: NumSizes - 1, Exit: 0}
	switch p := o.Predict(t); {
	case p > o.Threshold:
		a.Dir = 2
	case p < -o.Threshold:
		a.Dir = 0
	}
	return a
}
