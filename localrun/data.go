package localrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// Prepare prepares the data of a run of cfg and says what it is on w:
// one series (market.Prepare), or with data.series a panel
// (market.PreparePanel), whose joined training set is the Dataset a
// trainer is built on and whose parts validate and test.
func Prepare(ctx context.Context, w io.Writer, src prices.Source, cfg config.RunConfig) (*market.Dataset, *market.Panel, error) {
	if cfg.Data.Series != "" {
		pn, err := market.PreparePanel(ctx, src, cfg)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(w, "data: a panel of %d series (data.series, weighting %s), %d training bars joined\n",
			len(pn.Parts), cmp.Or(cfg.Data.Weighting, config.WeightingEqual), pn.Train.Train.Len())
		for k, d := range pn.Parts {
			fmt.Fprintf(w, "  %s: %s, %d bars, train %s (%d bars), validation %s (%d bars), test %s (%d bars); instrument %s\n",
				pn.Series[k].Name, pn.Series[k].Path, d.Bars.Len(), barSpan(d, d.Train), d.Train.Len(), barSpan(d, d.Valid), d.Valid.Len(),
				barSpan(d, d.Test), d.Test.Len(), DescribeInstrument(d))
		}
		return pn.Train, pn, nil
	}
	ds, err := market.Prepare(ctx, src, cfg)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "data: %s, %d bars, train %s (%d bars), validation %s (%d bars), test %s (%d bars)\n",
		ds.Bars.Name, ds.Bars.Len(), barSpan(ds, ds.Train), ds.Train.Len(), barSpan(ds, ds.Valid), ds.Valid.Len(), barSpan(ds, ds.Test), ds.Test.Len())
	if ds.Mirrored() {
		fmt.Fprintf(w, "data.mirror: training plays its %d bars and their mirror image, %d bars in all\n", ds.Train.Len(), ds.TrainingSet().Train.Len())
	}
	fmt.Fprintf(w, "instrument: %s\n", DescribeInstrument(ds))
	return ds, nil, nil
}

// validate is the validation backtest of tr's online network: on ds's
// validation range, its Sharpe and t-statistic (Report.SharpeT); or, on
// panel pn, the equal-risk portfolio of every series' own validation
// backtest (sim.PanelValidation) as one report, the portfolio's
// t-statistic and the series' reports.
func validate(ctx context.Context, tr trainer.Trainer, ds *market.Dataset, pn *market.Panel) (sim.Report, float64, []sim.Report, error) {
	if pn == nil {
		rep, err := tr.Backtest(ctx, ds, ds.Valid)
		return rep, rep.SharpeT(), nil, err
	}
	sc, err := sim.PanelValidation(func(d *market.Dataset, r market.Range) (sim.Report, error) { return tr.Backtest(ctx, d, r) }, pn.Names(), pn.Parts)
	if err != nil {
		return sim.Report{}, 0, nil, err
	}
	return sc.Report(), sc.T, sc.Parts, nil
}

// panelSeriesResults are the per-series rows of a panel run's result,
// with their validation reports valid (nil for a run on one series).
func panelSeriesResults(pn *market.Panel, valid []sim.Report) []SeriesResult {
	if pn == nil {
		return nil
	}
	out := make([]SeriesResult, len(pn.Series))
	for k, sp := range pn.Series {
		out[k] = SeriesResult{Name: sp.Name, Path: sp.Path, SHA256: pn.SHA256[k]}
		if k < len(valid) {
			out[k].Valid = valid[k]
		}
	}
	return out
}

// PanelHasTest reports whether every series of pn holds out a test range.
func PanelHasTest(pn *market.Panel) bool {
	for _, d := range pn.Parts {
		if d.Test.Len() < 2 {
			return false
		}
	}
	return true
}

// panelTest backtests the chosen checkpoint of a panel run on every
// series' test range and fills res's test reports: each series' own and
// the equal-risk portfolio's (and flat's, for a run that abstains).
// Nothing when a series holds out no test range.
func panelTest(ctx context.Context, opts func() (checkpoint.Options, error), pn *market.Panel, res *Result) error {
	if !PanelHasTest(pn) {
		return nil
	}
	pol, err := LoadPolicy(ctx, opts, res.Checkpoint)
	if err != nil {
		return err
	}
	sc, err := PanelBacktest(pol, pn, TestRange)
	if err != nil {
		return fmt.Errorf("test backtest of %s: %w", res.Checkpoint, err)
	}
	flat, err := sim.PanelPortfolio(func(d *market.Dataset, r market.Range) (sim.Report, error) {
		return sim.Backtest(d, r, flatPolicy{})
	}, pn.Names(), pn.Parts, TestRange)
	if err != nil {
		return fmt.Errorf("test backtest of flat: %w", err)
	}
	rep, fr := sc.Report(), flat.Report()
	res.Test, res.CheckpointTest, res.FlatTest = &rep, &rep, &fr
	if res.Abstained {
		res.Test = &fr
	}
	for k := range res.Series {
		t := sc.Parts[k]
		res.Series[k].Test = &t
	}
	return nil
}

// TestRange is a Dataset's test range.
func TestRange(d *market.Dataset) market.Range { return d.Test }

// PanelBacktest backtests pol on range(series) of every series of pn and
// scores their equal-risk portfolio.
func PanelBacktest(pol *policy.Policy, pn *market.Panel, rangeOf func(*market.Dataset) market.Range) (sim.PanelScore, error) {
	return sim.PanelPortfolio(pol.Backtest, pn.Names(), pn.Parts, rangeOf)
}

// CheckpointPanel is the panel a panel run's checkpoint ck (at path)
// trained on, prepared again from its config (the series read from src,
// so within the data roots) and held against what ck recorded
// (market.CheckPanel): a file whose SHA-256 differs, or a series split
// into other ranges, is an error naming the file, unless allowChanged,
// when it is a warning on w and the panel is used as it is now.
// nil, nil when ck is not the checkpoint of a panel run of `dqnflow
// train` or a TrainingRun: one series', or a walk-forward study's, whose
// record names no files (its windows' ranges are the study's, not its
// config's split), which commands treat as before, as one series'.
func CheckpointPanel(ctx context.Context, w io.Writer, src prices.Source, ck *checkpoint.Checkpoint, path string, allowChanged bool) (*market.Panel, error) {
	v, ok := ck.Meta[checkpoint.MetaPanel]
	if !ok {
		return nil, nil
	}
	recs, err := market.ParsePanelMeta(v)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if slices.ContainsFunc(recs, func(r market.PanelSeries) bool { return r.Path == "" }) {
		return nil, nil
	}
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if cfg.Data.Series == "" {
		return nil, fmt.Errorf("checkpoint %s: it records the files of a panel but its config has no data.series", path)
	}
	pn, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: its panel: %w", path, err)
	}
	if err := market.CheckPanel(recs, pn); err != nil {
		if !allowChanged || !errors.Is(err, market.ErrPanelChanged) {
			return nil, fmt.Errorf("checkpoint %s: %w; --allow-changed-data uses the files as they are now", path, err)
		}
		fmt.Fprintf(w, "warning: checkpoint %s: %v; going on with the files as they are now (--allow-changed-data)\n", path, err)
	}
	return pn, nil
}
