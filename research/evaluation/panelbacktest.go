package evaluation

import (
	"context"
	"fmt"
	"io"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// PanelBacktest is what "dqnflow backtest --json" prints for a
// panel run's checkpoint on its own panel: each series' report and their
// equal-risk portfolio's.
type PanelBacktest struct {
	Range          string                     `json:"range"`
	Series         []SeriesReport             `json:"series"`
	Portfolio      sim.Report                 `json:"portfolio"`
	PortfolioT     float64                    `json:"portfolio_sharpe_t"`
	Recommendation *checkpoint.Recommendation `json:"run_recommendation,omitempty"`
	Notice         string                     `json:"notice,omitempty"`

	instruments []string // each series' localrun.DescribeInstrument, for Print
}

// SeriesReport is one series' report of a PanelBacktest.
type SeriesReport struct {
	Name   string     `json:"name"`
	Path   string     `json:"path"`
	Report sim.Report `json:"report"`
}

// BacktestPanel backtests ck, a panel run's checkpoint read from ckPath,
// on every series of its panel (read again from src and held against the
// checkpoint's record: localrun.CheckpointPanel, whose warning goes to w)
// over rangeName of each (test, validation or all), and reports each and
// their equal-risk portfolio.
func BacktestPanel(ctx context.Context, w io.Writer, src prices.Source, ck *checkpoint.Checkpoint, ckPath, rangeName string, allowChanged bool) (PanelBacktest, error) {
	rangeOf := map[string]func(*market.Dataset) market.Range{
		"test":       localrun.TestRange,
		"validation": func(d *market.Dataset) market.Range { return d.Valid },
		"all":        func(d *market.Dataset) market.Range { return market.Range{From: d.Warmup, To: d.Bars.Len()} },
	}[rangeName]
	pn, err := localrun.CheckpointPanel(ctx, w, src, ck, ckPath, allowChanged)
	if err != nil {
		return PanelBacktest{}, err
	}
	if pn == nil {
		return PanelBacktest{}, fmt.Errorf("%w: flag --data is required: checkpoint %s is not a panel run's", usage.Err, ckPath)
	}
	if rangeName == "test" && !localrun.PanelHasTest(pn) {
		return PanelBacktest{}, fmt.Errorf("%w: the checkpoint's config holds out no test range; use --range validation", usage.Err)
	}
	pol, err := policy.Load(ck)
	if err != nil {
		return PanelBacktest{}, fmt.Errorf("checkpoint %s: %w", ckPath, err)
	}
	rec, err := RunRecommendation(ck, ckPath)
	if err != nil {
		return PanelBacktest{}, err
	}
	sc, err := localrun.PanelBacktest(pol, pn, rangeOf)
	if err != nil {
		return PanelBacktest{}, fmt.Errorf("backtest %s on its panel: %w", ckPath, err)
	}
	res := PanelBacktest{Range: rangeName, Portfolio: sc.Report(), PortfolioT: sc.T, Recommendation: rec, Notice: FlatNotice(rec)}
	for k, sp := range pn.Series {
		res.Series = append(res.Series, SeriesReport{Name: sp.Name, Path: sp.Path, Report: sc.Parts[k]})
		res.instruments = append(res.instruments, localrun.DescribeInstrument(pn.Parts[k]))
	}
	return res, nil
}

// Print writes r as text: each series' report and their portfolio's.
func (r PanelBacktest) Print(w io.Writer) {
	if r.Notice != "" {
		fmt.Fprintln(w, r.Notice)
	}
	for k, s := range r.Series {
		fmt.Fprintf(w, "%s (%s), %s range; instrument %s\n", s.Name, s.Path, r.Range, r.instruments[k])
		report.PrintBacktest(w, s.Report)
	}
	fmt.Fprintf(w, "equal-risk portfolio of the %d series, daily returns (Sharpe t = %.2f):\n", len(r.Series), r.PortfolioT)
	report.PrintBacktest(w, r.Portfolio)
}
