package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/research/evaluation"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// evaluateCmd is "dqnflow evaluate": for each series it trains the
// config (validation picks the checkpoint and stops early; with --seeds N
// at N seeds, each run reported beside the first, and the N checkpoints
// voting together) or takes --checkpoint, runs the policy once on the
// series' held-out test range, and writes report.md with the metrics beside buy-and-hold and flat,
// costs per trade and per round trip, and equity and drawdown PNGs.
func evaluateCmd(e *env) *cobra.Command {
	cmd := leaf("evaluate",
		"test-range report with plots for every bundled series and the synthetic one",
		"evaluate trains the config (or takes --checkpoint) on every bundled series and the synthetic one and writes a test-range report with plots.",
		"dqnflow evaluate --out reports/eval          # trains the defaults on every bundled series and the synthetic one",
		"dqnflow evaluate --data bundled:USA500IDXUSD_H1.csv --seeds 8   # eight runs: how much of one result is the seed",
		"dqnflow evaluate --checkpoint ck.safetensors --data bundled:bitcoin_2024.csv --out reports/ck")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file to train (default: built-in defaults)")
	ckPath := fs.String("checkpoint", "", "evaluate this checkpoint instead of training (its config gives the ranges)")
	series := fs.String("data", strings.Join(evaluation.SeriesNames(), ","), "comma-separated series: CSV files, bundled:NAME, synthetic")
	epochs := fs.Int("epochs", 0, "epochs per training run (default: the config's epochs)")
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	flagValues(fs, "device", deviceValues...)
	out := fs.String("out", "", "directory for the report, plots and runs (default: runs/<id>)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	seeds := fs.Int("seeds", 1, "train each series at this many seeds (the config's seed and the next ones) and report every run beside the first")
	allowChanged := fs.Bool("allow-changed-data", false, "with a panel run's --checkpoint: evaluate even when a series' file no longer has the SHA-256 (or the ranges) the checkpoint recorded, with a warning")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		var paths []string
		for _, p := range strings.Split(*series, ",") {
			if p = strings.TrimSpace(p); p != "" {
				paths = append(paths, p)
			}
		}
		src, err := df.source(paths...)
		if err != nil {
			return err
		}
		if *seeds < 1 || *seeds > 1000 {
			return fmt.Errorf("%w: --seeds %d: want 1 to 1000", errUsage, *seeds)
		}
		var cfg config.RunConfig
		var ck *checkpoint.Checkpoint
		var rec *checkpoint.Recommendation
		var pn *market.Panel // a panel checkpoint's own panel
		var panelScore sim.PanelScore
		if *ckPath != "" {
			if *cfgPath != "" {
				return fmt.Errorf("%w: give --config (train) or --checkpoint (evaluate it), not both", errUsage)
			}
			if *seeds != 1 {
				return fmt.Errorf("%w: --seeds trains; a --checkpoint is one trained policy", errUsage)
			}
			if ck, _, err = readCheckpoint(ctx, e, *ckPath); err != nil {
				return err
			}
			if cfg, err = trainer.CheckpointConfig(ck); err != nil {
				return fmt.Errorf("checkpoint %s: %w", *ckPath, err)
			}
			if rec, err = runRecommendation(ck, *ckPath); err != nil {
				return err
			}
			// A panel run's checkpoint is evaluated on its own panel
			// unless --data names other series.
			if _, isPanel := ck.Meta[checkpoint.MetaPanel]; isPanel && !fs.Changed("data") {
				if pn, err = localrun.CheckpointPanel(ctx, e.stderr, src, ck, *ckPath, *allowChanged); err != nil {
					return err
				}
				if paths, err = panelEvaluation(pn, ck, &panelScore); err != nil {
					return fmt.Errorf("evaluate %s on its panel: %w", *ckPath, err)
				}
			}
		} else if cfg, err = loadConfig(fs, *cfgPath, *device, "", *epochs); err != nil {
			return err
		}
		id := newRunID("evaluate")
		if *out == "" {
			*out = filepath.Join("runs", id)
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("create output directory: %w", err)
		}
		ev := evaluation.Evaluation{Date: time.Now().UTC().Format(time.RFC3339), Checkpoint: *ckPath, Config: cfg, Recommendation: rec, Notice: flatNotice(rec)}
		var sections []report.Section
		for i, path := range paths {
			slug := evaluation.SeriesSlug(path)
			s := evaluation.Series{Data: path}
			note := ""
			c := withData(cfg, path)
			if pn != nil {
				c = market.SeriesConfig(cfg, pn.Series[i])
				s.Test = panelScore.Parts[i]
				note = fmt.Sprintf("Checkpoint `%s`, trained on a panel of %d series (this one, %s, among them); test range of its config's split of this series, the features normalised by the series' own statistics.",
					filepath.Base(*ckPath), len(pn.Series), pn.Series[i].Name)
				if ev.Notice != "" {
					note += " Note: " + ev.Notice + "."
				}
			} else if ck != nil {
				if s.Test, err = evaluation.Checkpoint(ctx, src, ck, c); err != nil {
					return fmt.Errorf("evaluate %s on %s: %w", *ckPath, path, err)
				}
				note = fmt.Sprintf("Checkpoint `%s` (trained on %s), test range of its config's split of this series.", filepath.Base(*ckPath), cfg.Data.Path)
				if ev.Notice != "" {
					note += " Note: " + ev.Notice + "."
				}
			} else {
				fmt.Fprintf(e.stderr, "evaluate: training on %s\n", path)
				r, err := trainLocal(ctx, e, src, c, filepath.Join(*out, slug), id+"-"+slug)
				if err != nil {
					return fmt.Errorf("evaluate %s: %w", path, err)
				}
				if r.Test == nil {
					return fmt.Errorf("%w: evaluate reports the test range; the config holds none out (data.test_fraction 0)", errUsage)
				}
				s.Test, s.BestEpoch, s.Epochs = *r.Test, r.BestEpoch, r.Epochs
				note = fmt.Sprintf("Trained %d epochs (of %d); validation picked epoch %d (validation Sharpe %.3f, t = %.2f); the test range below was touched only by this report.",
					r.Epochs, c.Epochs, r.BestEpoch, r.Valid.Sharpe, r.ValidT)
				if r.Abstained {
					note += fmt.Sprintf(" That t is below backtest.min_valid_t (%g): the run found no edge and recommends flat, which is what the table shows; the checkpoint itself had a test Sharpe of %.3f with %d trades.",
						c.Backtest.MinValidT, r.CheckpointTest.Sharpe, r.CheckpointTest.Trades)
				}
				if *seeds > 1 {
					s.Seeds = append(s.Seeds, seedRow(c.Seed, r))
					members := []string{r.Checkpoint}
					for k := 1; k < *seeds; k++ {
						cs := c
						cs.Seed = c.Seed + uint64(k)
						fmt.Fprintf(e.stderr, "evaluate: training on %s, seed %d (%d of %d)\n", path, cs.Seed, k+1, *seeds)
						rk, err := trainLocal(ctx, e, src, cs, filepath.Join(*out, slug, fmt.Sprintf("seed-%d", cs.Seed)), fmt.Sprintf("%s-%s-seed%d", id, slug, cs.Seed))
						if err != nil {
							return fmt.Errorf("evaluate %s, seed %d: %w", path, cs.Seed, err)
						}
						s.Seeds = append(s.Seeds, seedRow(cs.Seed, rk))
						members = append(members, rk.Checkpoint)
					}
					sum := report.Summarize(s.Seeds)
					s.Summary = &sum
					if s.Ensemble, err = evaluateEnsemble(ctx, e, src, c, members); err != nil {
						return fmt.Errorf("evaluate %s: the seeds' ensemble: %w", path, err)
					}
				}
			}
			if s.Rule, err = evaluation.ChooseRule(ctx, src, c); err != nil {
				return fmt.Errorf("evaluate %s: the rules' yardstick: %w", path, err)
			}
			rt := s.Rule.Test
			note += fmt.Sprintf(" Yardstick: of the simple rules of `dqnflow baselines`, this validation range chooses %s (validation Sharpe %.3f, t = %.2f); on the test range it has Sharpe %.3f, return %.2f%%, max drawdown %.2f%%, %d trades.",
				s.Rule.Name, s.Rule.ValidSharpe, s.Rule.ValidT, rt.Sharpe, 100*rt.TotalReturn, 100*rt.MaxDrawdown, rt.Trades)
			if s.Equity, s.Drawdown, err = report.WritePlots(*out, slug, path, s.Test); err != nil {
				return err
			}
			ev.Series = append(ev.Series, s)
			sections = append(sections, report.Section{Title: path, Note: note, Report: s.Test, Equity: s.Equity, Drawdown: s.Drawdown, Seeds: s.Seeds, Ensemble: s.Ensemble})
		}
		if pn != nil {
			ev.Portfolio = &evaluation.Portfolio{Series: pn.Names(), Sharpe: panelScore.Sharpe, SharpeT: panelScore.T, Test: panelScore.Report()}
		}
		var md bytes.Buffer
		intro := fmt.Sprintf("`dqnflow evaluate`, %s. Each series is split into training, validation and test ranges (data.train_fraction %g, data.test_fraction %g); every number below is from the test range, after costs, beside buy-and-hold and flat on the same bars with the same costs.",
			ev.Date, cfg.Data.TrainFraction, cfg.Data.TestFraction)
		if p := ev.Portfolio; p != nil {
			intro += fmt.Sprintf(" The checkpoint's panel of %d series, as one equal-risk portfolio of their test ranges (daily returns): Sharpe %.3f (t = %.2f), return %.2f%%, max drawdown %.2f%%.",
				len(p.Series), p.Sharpe, p.SharpeT, 100*p.Test.TotalReturn, 100*p.Test.MaxDrawdown)
		}
		if err := report.WriteMarkdown(&md, "Evaluation", intro, sections); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "report.md"), md.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		if err := jsonfile.Write(filepath.Join(*out, "evaluate.json"), ev); err != nil {
			return err
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, ev)
		}
		evaluation.Print(e.stdout, ev, report.PrintBacktest)
		fmt.Fprintf(e.stdout, "report: %s\n", filepath.Join(*out, "report.md"))
		return nil
	}
	return cmd
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

// evaluateEnsemble backtests the checkpoints at paths, trained on cfg at
// several seeds, voting together (policy.Ensemble): on cfg's validation
// range for the evidence (backtest.min_valid_t, as a single run's
// abstention) and on its test range; src reads the data.
func evaluateEnsemble(ctx context.Context, e *env, src prices.Source, cfg config.RunConfig, paths []string) (*report.EnsembleRow, error) {
	ds, err := market.Prepare(ctx, src, cfg)
	if err != nil {
		return nil, err
	}
	ps := make([]*policy.Policy, len(paths))
	for i, p := range paths {
		if ps[i], err = localrun.LoadPolicy(ctx, e.ckpt.options, p); err != nil {
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

// panelEvaluation backtests the policy of ck, a panel run's checkpoint, on
// the test range of every series of its panel pn, into sc (each series'
// report and their equal-risk portfolio), and returns the series' paths.
func panelEvaluation(pn *market.Panel, ck *checkpoint.Checkpoint, sc *sim.PanelScore) ([]string, error) {
	if !localrun.PanelHasTest(pn) {
		return nil, fmt.Errorf("%w: the checkpoint's config holds out no test range (data.test_fraction 0); evaluate a run trained with one", errUsage)
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
