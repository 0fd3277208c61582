package stats

import "math"

// EqualRiskPortfolio is the return series of the equal-risk portfolio of
// several series aligned on time: returns[k][t] is series k's return at
// bar t of a common calendar, NaN where series k has no bar (before its
// first, after its last, a market holiday). The portfolio's return at t
// is the mean over the series present at t,
//
//	R_t = Σ_{k present at t} returns[k][t] / #present(t)
//
// that is, capital split equally among the series trading at t and
// rebalanced every bar.
//
// The series must already be risk-sized: each strategy's positions sized
// to the same target volatility of its instrument, estimated from the
// past only, by the one sizing rule of package market that the agent and
// every baseline share. That makes equal capital weights equal risk
// weights. This helper does not rescale the returns by their own past
// volatility, because (a) a second sizing rule would make the portfolio's
// figures differ from the per-series ones the report prints beside them,
// and (b) a strategy's own volatility collapses while it stays flat, so
// the first trade after a flat stretch would be levered without bound.
// A strategy held at 1× notional (plain buy-and-hold) is not risk-sized,
// and its portfolio is dominated by the most volatile instrument: size it
// with the same rule first.
//
// A bar where no series is present is an error (the calendar was not the
// union of the series' bars), as are series of different lengths and
// ±Inf returns.
func EqualRiskPortfolio(returns [][]float64) ([]float64, error) {
	if len(returns) == 0 {
		return nil, inputErr("returns: no series given")
	}
	n := len(returns[0])
	for k, s := range returns {
		if len(s) != n {
			return nil, inputErr("returns[%d] has %d bars and returns[0] %d: the series must be aligned on one calendar (NaN where a series has no bar)", k, len(s), n)
		}
		for t, v := range s {
			if math.IsInf(v, 0) {
				return nil, inputErr("returns[%d][%d] is %v: a return must be finite, or NaN for no bar", k, t, v)
			}
		}
	}
	out := make([]float64, n)
	for t := range out {
		sum, present := 0.0, 0
		for _, s := range returns {
			if v := s[t]; !math.IsNaN(v) {
				sum += v
				present++
			}
		}
		if present == 0 {
			return nil, inputErr("bar %d: no series has a return there: the calendar must hold only bars where at least one series trades", t)
		}
		out[t] = sum / float64(present)
	}
	return out, nil
}

// InverseVolWeights is, for each series k and bar t of a common calendar,
// the risk weight 1/σ_k,t with σ_k,t the sample standard deviation
// (StdDev) of the last window values of sizing[k] strictly before bar t
// that are not NaN: known at the close of bar t − 1, so a portfolio
// weighted by it looks at nothing after it trades. The weight is NaN
// (no weight: the series stays out of the portfolio at t) where
// sizing[k][t] is NaN, where fewer than minObs past values exist (the
// warm-up) or where σ_k,t is 0.
//
// sizing[k] is what measures series k's risk. For strategies whose
// positions are capped at a full position of their instrument, pass the
// instrument's own return at that position (a buy-and-hold series on the
// same bars): every strategy then gets the same weights, and a strategy
// that stayed flat for months is not levered on its first trade, which
// sizing by a strategy's own past would do (see EqualRiskPortfolio).
// 1 ≤ minObs ≤ window; minObs < 2 is taken as 2, since one value has no
// standard deviation.
func InverseVolWeights(sizing [][]float64, window, minObs int) ([][]float64, error) {
	if len(sizing) == 0 {
		return nil, inputErr("sizing: no series given")
	}
	if window < 2 || minObs < 1 || minObs > window {
		return nil, inputErr("volatility window %d, at least %d values: want 2 ≤ window and 1 ≤ minObs ≤ window", window, minObs)
	}
	minObs = max(minObs, 2)
	n := len(sizing[0])
	out := make([][]float64, len(sizing))
	past := make([]float64, 0, window)
	for k, s := range sizing {
		if len(s) != n {
			return nil, inputErr("sizing[%d] has %d bars and sizing[0] %d: the series must be aligned on one calendar (NaN where a series has no bar)", k, len(s), n)
		}
		w := make([]float64, n)
		past = past[:0]
		for t, v := range s {
			w[t] = math.NaN()
			if math.IsInf(v, 0) {
				return nil, inputErr("sizing[%d][%d] is %v: a return must be finite, or NaN for no bar", k, t, v)
			}
			if math.IsNaN(v) {
				continue
			}
			if len(past) >= minObs {
				if sd := StdDev(past); sd > 0 {
					w[t] = 1 / sd
				}
			}
			if len(past) == window {
				copy(past, past[1:])
				past = past[:window-1]
			}
			past = append(past, v)
		}
		out[k] = w
	}
	return out, nil
}

// WeightedPortfolio is the return series of the portfolio of several
// series aligned on time that splits its capital at each bar among the
// series present there in proportion to their weights,
//
//	R_t = Σ_k w_k,t · r_k,t / Σ_k w_k,t   over k with r_k,t and w_k,t not NaN
//
// rebalanced every bar. It is NaN at a bar where no series has both a
// return and a weight (InverseVolWeights' warm-up): drop those bars. With
// every weight 1 it is EqualRiskPortfolio. Weights must be positive or
// NaN; series of different lengths and ±Inf are errors.
func WeightedPortfolio(returns, weights [][]float64) ([]float64, error) {
	if len(returns) == 0 {
		return nil, inputErr("returns: no series given")
	}
	if len(weights) != len(returns) {
		return nil, inputErr("weights: %d series for %d series of returns: want one each", len(weights), len(returns))
	}
	n := len(returns[0])
	for k := range returns {
		if len(returns[k]) != n || len(weights[k]) != n {
			return nil, inputErr("returns[%d] has %d bars, weights[%d] %d and returns[0] %d: the series must be aligned on one calendar (NaN where a series has no bar)",
				k, len(returns[k]), k, len(weights[k]), n)
		}
		for t := range n {
			if v := returns[k][t]; math.IsInf(v, 0) {
				return nil, inputErr("returns[%d][%d] is %v: a return must be finite, or NaN for no bar", k, t, v)
			}
			if w := weights[k][t]; math.IsInf(w, 0) || w <= 0 {
				return nil, inputErr("weights[%d][%d] is %v: a weight must be positive and finite, or NaN for none", k, t, w)
			}
		}
	}
	out := make([]float64, n)
	for t := range out {
		sum, wsum := 0.0, 0.0
		for k := range returns {
			r, w := returns[k][t], weights[k][t]
			if !math.IsNaN(r) && !math.IsNaN(w) {
				sum += w * r
				wsum += w
			}
		}
		out[t] = math.NaN()
		if wsum > 0 {
			out[t] = sum / wsum
		}
	}
	return out, nil
}
