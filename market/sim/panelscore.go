package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/stats"
)

// PanelScore is a panel run's policy judged on one range of every
// series: the equal-risk portfolio of its backtests.
type PanelScore struct {
	// Sharpe is the portfolio's annualised Sharpe ratio of daily returns,
	// T its t-statistic (stats.EstimateSharpe; 0 for a portfolio that
	// never moved).
	Sharpe, T float64
	// Parts are the per-series reports, in the order given.
	Parts []Report
	// Days are the portfolio's days (since 1970-01-01, UTC) and Returns
	// its return on each, BuyAndHold the return of the same portfolio of
	// the series' buy-and-hold (Report.BuyAndHoldEquity); DaysPerYear
	// annualises them.
	Days        []int32
	Returns     []float64
	BuyAndHold  []float64
	DaysPerYear float64
}

// PanelValidation backtests a policy (bt) on the validation range of
// every part and scores the equal-risk portfolio of the results
// (PanelPortfolio). It picks a panel run's best epoch, in `dqnflow train`,
// the TrainingRun and the walk-forward study alike.
func PanelValidation(bt func(ds *market.Dataset, r market.Range) (Report, error), names []string, parts []*market.Dataset) (PanelScore, error) {
	return PanelPortfolio(bt, names, parts, func(d *market.Dataset) market.Range { return d.Valid })
}

// PanelPortfolio backtests a policy (bt) on range(part) of every part and
// scores the equal-risk portfolio of the results: each part's daily
// returns (DailyReturns of its equity), aligned on the union of the parts'
// days (NaN where a series has no bar that day), averaged over the series
// present each day (stats.EqualRiskPortfolio). Every part's contract is
// sized by the one sizing rule (env.sizing), so equal capital is equal
// risk where that rule targets volatility, and equal notional under
// "notional". The Sharpe ratio is annualised with the portfolio's days
// over the parts' mean length in years (bars over BarsPerYear). This is a
// daily-return Sharpe ratio, where a single series' run is chosen on its
// bar-return Sharpe ratio (Report.Sharpe): the two are comparable in size
// but not equal for the same policy.
func PanelPortfolio(bt func(ds *market.Dataset, r market.Range) (Report, error), names []string, parts []*market.Dataset, rangeOf func(*market.Dataset) market.Range) (PanelScore, error) {
	var sc PanelScore
	if len(parts) == 0 {
		return sc, fmt.Errorf("panel backtest: no series")
	}
	days := make([][]int32, len(parts))
	rets := make([][]float64, len(parts))
	holds := make([][]float64, len(parts))
	years := 0.0
	for k, p := range parts {
		r := rangeOf(p)
		rep, err := bt(p, r)
		if err != nil {
			return sc, fmt.Errorf("panel backtest on %s: %w", names[k], err)
		}
		sc.Parts = append(sc.Parts, rep)
		if days[k], rets[k], err = DailyReturns(p.Bars, r, rep.Equity); err != nil {
			return sc, fmt.Errorf("panel backtest on %s: %w", names[k], err)
		}
		holds[k] = make([]float64, len(rets[k])) // flat where a report carries no buy-and-hold curve
		if len(rep.BuyAndHoldEquity) == r.Len() {
			if _, holds[k], err = DailyReturns(p.Bars, r, rep.BuyAndHoldEquity); err != nil {
				return sc, fmt.Errorf("panel backtest on %s: buy and hold: %w", names[k], err)
			}
		}
		if !(p.BarsPerYear > 0) {
			return sc, fmt.Errorf("panel backtest on %s: bars per year %g must be positive", names[k], p.BarsPerYear)
		}
		years += float64(r.Len()) / p.BarsPerYear / float64(len(parts))
	}
	var cal []int32
	for _, d := range days {
		cal = append(cal, d...)
	}
	slices.Sort(cal)
	cal = slices.Compact(cal)
	port, err := equalRisk(cal, days, rets)
	if err != nil {
		return sc, fmt.Errorf("panel backtest: %w", err)
	}
	if sc.BuyAndHold, err = equalRisk(cal, days, holds); err != nil {
		return sc, fmt.Errorf("panel backtest: buy and hold: %w", err)
	}
	sc.Days, sc.Returns, sc.DaysPerYear = cal, port, float64(len(cal))/years
	sc.Sharpe = stats.Annualise(stats.Sharpe(port), sc.DaysPerYear)
	if e, err := stats.EstimateSharpe(port); err == nil {
		sc.T = e.TStat()
	}
	return sc, nil
}

// equalRisk aligns each series' daily returns rets[k] (on days[k]) on the
// calendar cal, NaN where a series has no bar that day, and averages the
// series present each day (stats.EqualRiskPortfolio).
func equalRisk(cal []int32, days [][]int32, rets [][]float64) ([]float64, error) {
	aligned := make([][]float64, len(rets))
	for k := range rets {
		a := make([]float64, len(cal))
		for i := range a {
			a[i] = math.NaN()
		}
		for i, d := range days[k] {
			j, _ := slices.BinarySearch(cal, d)
			a[j] = rets[k][i]
		}
		aligned[k] = a
	}
	return stats.EqualRiskPortfolio(aligned)
}

// Report is the portfolio as one backtest report, for what records and
// prints one per backtest (a TrainingRun's validation row): its metrics
// are Measure's of the daily equity curve (the first series' initial
// capital compounded by the portfolio's returns, with DaysPerYear), its
// Sharpe the portfolio's (sc.Sharpe, what picks the epoch), its trades
// and costs the series' sums, From and To the earliest and latest bar of
// the parts' ranges; BuyAndHold and Flat are the same portfolio's of the
// series' buy-and-hold and of flat. The instrument is left empty: it is
// per series (sc.Parts).
func (sc PanelScore) Report() Report {
	var rep Report
	if len(sc.Parts) == 0 {
		return rep
	}
	capital := sc.Parts[0].Instrument.InitialCapital
	if !(capital > 0) {
		capital = 1
	}
	curve := func(rets []float64) []float64 {
		eq := make([]float64, len(sc.Returns)+1)
		eq[0] = capital
		for i := range sc.Returns {
			r := 0.0
			if i < len(rets) {
				r = rets[i]
			}
			eq[i+1] = eq[i] * (1 + r)
		}
		return eq
	}
	rep.Metrics = Measure(curve(sc.Returns), nil, nil, 0, sc.DaysPerYear)
	rep.BuyAndHold = Measure(curve(sc.BuyAndHold), nil, nil, 0, sc.DaysPerYear)
	rep.Flat = Measure(curve(nil), nil, nil, 0, sc.DaysPerYear)
	rep.Sharpe, rep.BarsPerYear = sc.Sharpe, sc.DaysPerYear
	for k, p := range sc.Parts {
		rep.Trades += p.Trades
		rep.Costs += p.Costs
		if k == 0 || p.From.Before(rep.From) {
			rep.From = p.From
		}
		if k == 0 || p.To.After(rep.To) {
			rep.To = p.To
		}
	}
	if rep.Trades > 0 {
		rep.CostPerTrade = rep.Costs / float64(rep.Trades)
	}
	return rep
}
