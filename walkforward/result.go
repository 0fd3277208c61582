package walkforward

import (
	"fmt"
	"hash/fnv"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/stats"
)

// NewResult is the Result of a backtest report rep of one strategy over
// bars r of ds (rep = sim.Backtest(ds, r, …)): its daily returns
// (DailyReturns), their annualised Sharpe ratio with its block-bootstrap
// 95 % interval and t-statistic (stats.EstimateSharpe, stats.Bootstrap
// seeded from the row's identity, so the same row gets the same
// interval), and the report's total return, drawdown, turnover and costs
// (a share of the initial capital). Days a year, which annualise the
// daily figures, are daysPerYear's. A series
// of equal returns (flat) has Sharpe 0, interval [0, 0] and t 0.
func NewResult(id Result, ds *market.Dataset, r market.Range, rep sim.Report) (Result, error) {
	res := id
	days, rets, err := sim.DailyReturns(ds.Bars, r, rep.Equity)
	if err != nil {
		return res, fmt.Errorf("%s on %s, window %d: %w", id.Strategy, id.Series, id.Window, err)
	}
	res.Days, res.Returns = days, rets
	res.Bars = rep.Bars
	res.BarSharpe = rep.Sharpe
	res.TotalReturn, res.MaxDrawdown, res.Turnover = rep.TotalReturn, rep.MaxDrawdown, rep.Turnover
	if c := ds.Instrument.InitialCapital; c > 0 {
		res.Costs = rep.Costs / c
	}
	res.DaysPerYear = daysPerYear(days)
	res.Sharpe = stats.Annualise(stats.Sharpe(rets), res.DaysPerYear)
	res.SharpeLo, res.SharpeHi = res.Sharpe, res.Sharpe
	if e, err := stats.EstimateSharpe(rets); err == nil {
		res.SharpeT = e.TStat()
		if iv, err := (stats.Bootstrap{Seed: id.bootSeed()}).Sharpe(rets); err == nil {
			iv = iv.Annualised(res.DaysPerYear)
			res.SharpeLo, res.SharpeHi = iv.Lo, iv.Hi
		}
	}
	return res, nil
}

// bootSeed names the row's bootstrap stream: a hash of window, series,
// strategy and seed.
func (r Result) bootSeed() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d", r.Window, r.Series, r.Strategy, r.Seed)
	return h.Sum64()
}

// daysPerYear is how many days with a bar a year holds on the block of
// days (sorted, distinct): their count over the span from the first to
// the last, inclusive, in years of 365.25 days; about 252 for a stock,
// 312 for forex, 365 for crypto over a year's block. (Before, it was
// Dataset.BarsPerYear × days / bars, which a series with gaps in its
// bars, e.g. UNIUSDT's hours, put at 500.) A block of weeks spans its
// weekdays only, so a short block reads high; the study's blocks are a
// year by default. An empty block has 0.
func daysPerYear(days []int32) float64 {
	if len(days) == 0 {
		return 0
	}
	span := float64(days[len(days)-1]-days[0]) + 1
	return float64(len(days)) * 365.25 / span
}
