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
