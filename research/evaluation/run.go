package evaluation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// Options are an evaluation's inputs: its record so far (Evaluation:
// date, checkpoint, config, recommendation), the series and where the
// report goes.
type Options struct {
	Evaluation
	// Source reads the series at Paths.
	Source prices.Source
	Paths  []string
	// Out is the directory of report.md, evaluate.json, the plots and
	// the runs, ID the evaluation's id (its runs are ID-SLUG).
	Out, ID string
	// Evaluated, when set, is the checkpoint (at Evaluation.Checkpoint)
	// evaluated in place of training; Panel,
	// for a panel run's checkpoint on its own panel, is that panel and
	// PanelScore the checkpoint's test backtests on it (PanelEvaluation).
	Evaluated  *checkpoint.Checkpoint
	Panel      *market.Panel
	PanelScore sim.PanelScore
	// Seeds is how many seeds each series trains at (1: one run).
	Seeds int
	// Train trains cfg to out as run runID (localrun.Run with the
	// command's backend and checkpoint flags); ReadOptions gives the
	// options its checkpoints are read back with.
	Train       func(ctx context.Context, cfg config.RunConfig, out, runID string) (localrun.Result, error)
	ReadOptions func() (checkpoint.Options, error)
	// Stderr receives the progress.
	Stderr io.Writer
}

// Run evaluates every series of o: it trains o.Config on the series
// (validation picks the checkpoint and stops early; with o.Seeds N at N
// seeds, each run reported beside the first, and the N checkpoints
// voting together) or takes o.Checkpoint, runs the policy once on the
// series' held-out test range beside the rule its validation range
// chooses, and writes report.md with the metrics beside buy-and-hold and
// flat, equity and drawdown PNGs, and evaluate.json, under o.Out.
func Run(ctx context.Context, o Options) (Evaluation, error) {
	ev, cfg, src, pn := o.Evaluation, o.Config, o.Source, o.Panel
	var sections []report.Section
	for i, path := range o.Paths {
		slug := SeriesSlug(path)
		s := Series{Data: path}
		note := ""
		c := cfg
		c.Data.Path = path
		var err error
		if pn != nil {
			c = market.SeriesConfig(cfg, pn.Series[i])
			s.Test = o.PanelScore.Parts[i]
			note = fmt.Sprintf("Checkpoint `%s`, trained on a panel of %d series (this one, %s, among them); test range of its config's split of this series, the features normalised by the series' own statistics.",
				filepath.Base(ev.Checkpoint), len(pn.Series), pn.Series[i].Name)
			if ev.Notice != "" {
				note += " Note: " + ev.Notice + "."
			}
		} else if o.Evaluated != nil {
			if s.Test, err = Checkpoint(ctx, src, o.Evaluated, c); err != nil {
				return ev, fmt.Errorf("evaluate %s on %s: %w", ev.Checkpoint, path, err)
			}
			note = fmt.Sprintf("Checkpoint `%s` (trained on %s), test range of its config's split of this series.", filepath.Base(ev.Checkpoint), cfg.Data.Path)
			if ev.Notice != "" {
				note += " Note: " + ev.Notice + "."
			}
		} else if note, err = trainSeries(ctx, o, c, path, slug, &s); err != nil {
			return ev, err
		}
		if s.Rule, err = ChooseRule(ctx, src, c); err != nil {
			return ev, fmt.Errorf("evaluate %s: the rules' yardstick: %w", path, err)
		}
		rt := s.Rule.Test
		note += fmt.Sprintf(" Yardstick: of the simple rules of `dqnflow baselines`, this validation range chooses %s (validation Sharpe %.3f, t = %.2f); on the test range it has Sharpe %.3f, return %.2f%%, max drawdown %.2f%%, %d trades.",
			s.Rule.Name, s.Rule.ValidSharpe, s.Rule.ValidT, rt.Sharpe, 100*rt.TotalReturn, 100*rt.MaxDrawdown, rt.Trades)
		if s.Equity, s.Drawdown, err = report.WritePlots(o.Out, slug, path, s.Test); err != nil {
			return ev, err
		}
		ev.Series = append(ev.Series, s)
		sections = append(sections, report.Section{Title: path, Note: note, Report: s.Test, Equity: s.Equity, Drawdown: s.Drawdown, Seeds: s.Seeds, Ensemble: s.Ensemble})
	}
	if pn != nil {
		sc := o.PanelScore
		ev.Portfolio = &Portfolio{Series: pn.Names(), Sharpe: sc.Sharpe, SharpeT: sc.T, Test: sc.Report()}
	}
	var md bytes.Buffer
	intro := fmt.Sprintf("`dqnflow evaluate`, %s. Each series is split into training, validation and test ranges (data.train_fraction %g, data.test_fraction %g); every number below is from the test range, after costs, beside buy-and-hold and flat on the same bars with the same costs.",
		ev.Date, cfg.Data.TrainFraction, cfg.Data.TestFraction)
	if p := ev.Portfolio; p != nil {
		intro += fmt.Sprintf(" The checkpoint's panel of %d series, as one equal-risk portfolio of their test ranges (daily returns): Sharpe %.3f (t = %.2f), return %.2f%%, max drawdown %.2f%%.",
			len(p.Series), p.Sharpe, p.SharpeT, 100*p.Test.TotalReturn, 100*p.Test.MaxDrawdown)
	}
	if err := report.WriteMarkdown(&md, "Evaluation", intro, sections); err != nil {
		return ev, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "report.md"), md.Bytes(), 0o644); err != nil {
		return ev, fmt.Errorf("write report: %w", err)
	}
	return ev, jsonfile.Write(filepath.Join(o.Out, "evaluate.json"), ev)
}

// trainSeries trains c on the series at path into s (its test report,
// epochs and, with o.Seeds > 1, every seed's row, their summary and
// ensemble) and returns the section's note.
func trainSeries(ctx context.Context, o Options, c config.RunConfig, path, slug string, s *Series) (string, error) {
	fmt.Fprintf(o.Stderr, "evaluate: training on %s\n", path)
	r, err := o.Train(ctx, c, filepath.Join(o.Out, slug), o.ID+"-"+slug)
	if err != nil {
		return "", fmt.Errorf("evaluate %s: %w", path, err)
	}
	if r.Test == nil {
		return "", fmt.Errorf("%w: evaluate reports the test range; the config holds none out (data.test_fraction 0)", usage.Err)
	}
	s.Test, s.BestEpoch, s.Epochs = *r.Test, r.BestEpoch, r.Epochs
	note := fmt.Sprintf("Trained %d epochs (of %d); validation picked epoch %d (validation Sharpe %.3f, t = %.2f); the test range below was touched only by this report.",
		r.Epochs, c.Epochs, r.BestEpoch, r.Valid.Sharpe, r.ValidT)
	if r.Abstained {
		note += fmt.Sprintf(" That t is below backtest.min_valid_t (%g): the run found no edge and recommends flat, which is what the table shows; the checkpoint itself had a test Sharpe of %.3f with %d trades.",
			c.Backtest.MinValidT, r.CheckpointTest.Sharpe, r.CheckpointTest.Trades)
	}
	if o.Seeds <= 1 {
		return note, nil
	}
	s.Seeds = append(s.Seeds, seedRow(c.Seed, r))
	members := []string{r.Checkpoint}
	for k := 1; k < o.Seeds; k++ {
		cs := c
		cs.Seed = c.Seed + uint64(k)
		fmt.Fprintf(o.Stderr, "evaluate: training on %s, seed %d (%d of %d)\n", path, cs.Seed, k+1, o.Seeds)
		rk, err := o.Train(ctx, cs, filepath.Join(o.Out, slug, fmt.Sprintf("seed-%d", cs.Seed)), fmt.Sprintf("%s-%s-seed%d", o.ID, slug, cs.Seed))
		if err != nil {
			return "", fmt.Errorf("evaluate %s, seed %d: %w", path, cs.Seed, err)
		}
		s.Seeds = append(s.Seeds, seedRow(cs.Seed, rk))
		members = append(members, rk.Checkpoint)
	}
	sum := report.Summarize(s.Seeds)
	s.Summary = &sum
	if s.Ensemble, err = ensemble(ctx, o.Source, o.ReadOptions, c, members); err != nil {
		return "", fmt.Errorf("evaluate %s: the seeds' ensemble: %w", path, err)
	}
	return note, nil
}

// seedRow is the report's row of a run trained at seed.
func seedRow(seed uint64, r localrun.Result) report.SeedRow {
	row := report.SeedRow{Seed: seed, BestEpoch: r.BestEpoch, Epochs: r.Epochs, ValidSharpe: r.Valid.Sharpe, ValidT: r.ValidT, Abstained: r.Abstained}
	if r.Test != nil {
		row.Test = *r.Test
	}
	row.Checkpoint = row.Test
	if r.CheckpointTest != nil {
		row.Checkpoint = *r.CheckpointTest
	}
	return row
}

// ensemble backtests the checkpoints at paths, trained on cfg at several
// seeds and read with the options opts gives, voting together
// (policy.Ensemble): on cfg's validation range for the evidence
// (backtest.min_valid_t, as a single run's abstention) and on its test
// range; src reads the data.
func ensemble(ctx context.Context, src prices.Source, opts func() (checkpoint.Options, error), cfg config.RunConfig, paths []string) (*report.EnsembleRow, error) {
	ds, err := market.Prepare(ctx, src, cfg)
	if err != nil {
		return nil, err
	}
	ps := make([]*policy.Policy, len(paths))
	for i, p := range paths {
		if ps[i], err = localrun.LoadPolicy(ctx, opts, p); err != nil {
			return nil, err
		}
	}
	ens, err := policy.NewEnsemble(ps)
	if err != nil {
		return nil, err
	}
	row := &report.EnsembleRow{Members: len(ps)}
	if row.Valid, err = ens.Backtest(ds, ds.Valid); err != nil {
		return nil, fmt.Errorf("validation backtest: %w", err)
	}
	row.ValidT = row.Valid.SharpeT()
	if row.Own, err = ens.Backtest(ds, ds.Test); err != nil {
		return nil, fmt.Errorf("test backtest: %w", err)
	}
	row.Test = row.Own
	if cfg.Backtest.NoEdge(row.ValidT) {
		row.Abstained = true
		if row.Test, err = localrun.FlatTest(ds); err != nil {
			return nil, err
		}
	}
	return row, nil
}

// PanelEvaluation backtests the policy of ck, a panel run's checkpoint, on
// the test range of every series of its panel pn, into sc (each series'
// report and their equal-risk portfolio), and returns the series' paths.
func PanelEvaluation(pn *market.Panel, ck *checkpoint.Checkpoint, sc *sim.PanelScore) ([]string, error) {
	if !localrun.PanelHasTest(pn) {
		return nil, fmt.Errorf("%w: the checkpoint's config holds out no test range (data.test_fraction 0); evaluate a run trained with one", usage.Err)
	}
	pol, err := policy.Load(ck)
	if err != nil {
		return nil, err
	}
	if *sc, err = localrun.PanelBacktest(pol, pn, localrun.TestRange); err != nil {
		return nil, err
	}
	paths := make([]string, len(pn.Series))
	for k, sp := range pn.Series {
		paths[k] = sp.Path
	}
	return paths, nil
}
