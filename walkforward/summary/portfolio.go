package summary

import "slices"

// Portfolio is one strategy's portfolio across a group's series, day by
// day: what its Measure's figures are computed from. Days are days since
// 1970-01-01 (UTC), increasing; Returns[i] is the portfolio's return on
// Days[i]. Compounding them, Π(1 + r), gives the equity curve whose end
// is Measure.TotalReturn + 1.
type Portfolio struct {
	Strategy string // StrategyAgent (its mean over seeds) or a baseline's
	Days     []int32
	Returns  []float64
}

// Portfolios returns the daily returns of the group's portfolios: the
// agent's mean over seeds first, then each baseline in Baselines' order.
// They are not in summary.json; a Group decoded from it has none.
func (g Group) Portfolios() []Portfolio {
	out := make([]Portfolio, len(g.portfolios))
	for i, p := range g.portfolios {
		out[i] = Portfolio{Strategy: p.Strategy, Days: slices.Clone(p.Days), Returns: slices.Clone(p.Returns)}
	}
	return out
}

// Equity is the portfolio's compounded equity after each day, starting
// from 1 before the first: equity[i] = Π_{j≤i} (1 + Returns[j]).
func (p Portfolio) Equity() []float64 {
	out := make([]float64, len(p.Returns))
	e := 1.0
	for i, r := range p.Returns {
		e *= 1 + r
		out[i] = e
	}
	return out
}
