package walkforward

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/stats"
)

// MetaPanel is the checkpoint metadata key of a panel run: the series it
// trained on and their ranges (PanelRanges JSON).
const MetaPanel = "walkforward_panel"

// PanelSeries is one series of a panel run as its checkpoint records it:
// the name and the first and last bar times (UTC) of its training and
// validation ranges.
type PanelSeries struct {
	Series     string    `json:"series"`
	TrainFrom  time.Time `json:"train_from"`
	TrainLast  time.Time `json:"train_last"`
	ValidFrom  time.Time `json:"valid_from"`
	ValidLast  time.Time `json:"valid_last"`
	TrainBars  int       `json:"train_bars"`
	ValidBars  int       `json:"valid_bars"`
	Instrument string    `json:"instrument"`
}

// PanelRanges is the MetaPanel value of a run on series names with
// datasets parts (in the same order).
func PanelRanges(names []string, parts []*market.Dataset) (string, error) {
	out := make([]PanelSeries, len(parts))
	for k, p := range parts {
		tr, va := p.Train, p.Valid
		if tr.Len() < 1 || va.Len() < 1 {
			return "", fmt.Errorf("panel series %s: training %s or validation %s is empty", names[k], tr, va)
		}
		t := p.Bars.Time
		out[k] = PanelSeries{Series: names[k], TrainFrom: t[tr.From].UTC(), TrainLast: t[tr.To-1].UTC(),
			ValidFrom: t[va.From].UTC(), ValidLast: t[va.To-1].UTC(), TrainBars: tr.Len(), ValidBars: va.Len(),
			Instrument: p.Instrument.Name}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// PanelScore is the validation of a panel run's policy: the equal-risk
// portfolio of its validation backtests on every series.
type PanelScore struct {
	// Sharpe is the portfolio's annualised Sharpe ratio of daily returns,
	// T its t-statistic (stats.EstimateSharpe; 0 for a portfolio that
	// never moved).
	Sharpe, T float64
	// Parts are the per-series validation reports, in the order given.
	Parts []market.Report
}

// PanelValidation backtests a policy (bt) on the validation range of
// every part and scores the equal-risk portfolio of the results: each
// part's daily returns (DailyReturns of its equity), aligned on the union
// of the parts' days (NaN where a series has no bar that day), averaged
// over the series present each day (stats.EqualRiskPortfolio). Every
// part's contract is sized by the one sizing rule (env.sizing), so equal
// capital is equal risk where that rule targets volatility, and equal
// notional under "notional". The Sharpe ratio is annualised with the
// portfolio's days over the parts' mean length in years (bars over
// BarsPerYear). This is a daily-return Sharpe ratio, where a single
// series' run is chosen on its bar-return Sharpe ratio (Report.Sharpe):
// the two are comparable in size but not equal for the same policy.
func PanelValidation(bt func(ds *market.Dataset, r market.Range) (market.Report, error), names []string, parts []*market.Dataset) (PanelScore, error) {
	var sc PanelScore
	if len(parts) == 0 {
		return sc, fmt.Errorf("panel validation: no series")
	}
	days := make([][]int32, len(parts))
	rets := make([][]float64, len(parts))
	years := 0.0
	for k, p := range parts {
		rep, err := bt(p, p.Valid)
		if err != nil {
			return sc, fmt.Errorf("panel validation on %s: %w", names[k], err)
		}
		sc.Parts = append(sc.Parts, rep)
		if days[k], rets[k], err = DailyReturns(p.Bars, p.Valid, rep.Equity); err != nil {
			return sc, fmt.Errorf("panel validation on %s: %w", names[k], err)
		}
		if !(p.BarsPerYear > 0) {
			return sc, fmt.Errorf("panel validation on %s: bars per year %g must be positive", names[k], p.BarsPerYear)
		}
		years += float64(p.Valid.Len()) / p.BarsPerYear / float64(len(parts))
	}
	var cal []int32
	for _, d := range days {
		cal = append(cal, d...)
	}
	slices.Sort(cal)
	cal = slices.Compact(cal)
	aligned := make([][]float64, len(parts))
	for k := range parts {
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
	port, err := stats.EqualRiskPortfolio(aligned)
	if err != nil {
		return sc, fmt.Errorf("panel validation: %w", err)
	}
	sc.Sharpe = stats.Annualise(stats.Sharpe(port), float64(len(cal))/years)
	if e, err := stats.EstimateSharpe(port); err == nil {
		sc.T = e.TStat()
	}
	return sc, nil
}
