package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/research/evaluation"
	"github.com/dqnflow/dqnflow/runview"
)

// reportCmd is "dqnflow report RUN|SWEEP --out DIR [--data FILE]", or
// "dqnflow report --walkforward DIR_OR_STUDY_ID --out DIR".
func reportCmd(e *env) *cobra.Command {
	cmd := leaf("report RUN",
		"HTML report with plots of a run or a sweep",
		"report writes an HTML report with plots of a run (loss, Q, ε, Sharpe, equity, drawdown, actions) or of a sweep (its runs ranked, each grid key's effect) into a directory; "+
			"with --walkforward, of a walk-forward study (its portfolios' Sharpe ratios with intervals and DSR against each baseline, per-series and per-year tables, equity and Sharpe plots).",
		"dqnflow report lr-3e-4 --out reports/lr-3e-4 && open reports/lr-3e-4/index.html",
		"dqnflow report sweep-20261201-120000-ab12cd34 --out reports/sweep",
		"dqnflow report --walkforward runs/wf --out reports/wf")
	fs := cmd.Flags()
	e.conn.register(fs)
	out := fs.String("out", "", "directory to write index.html and the plots into (created if missing)")
	data := fs.String("data", "", "price data of the backtest plots (default: the run's data.path)")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	wf := fs.String("walkforward", "", "report a walk-forward study instead: its directory, its results.json, or its id in the metadata store (walkforward record)")
	cmd.Args = argsBetween(0, 1)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		if *wf != "" || len(pos) == 0 {
			return reportWalkForward(ctx, e, cmd, *wf, *out, pos)
		}
		src, err := df.source(*data)
		if err != nil {
			return err
		}
		if err := required(fs, "out"); err != nil {
			return err
		}
		id := pos[0]
		st, err := openReader(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		rec, err := runview.Load(ctx, st, id)
		if errors.Is(err, metadata.ErrNotFound) {
			// Not a run: a sweep is a workflow whose result lists its runs.
			c, derr := dial(ctx, e)
			if derr != nil {
				return fmt.Errorf("%w; and it cannot be a sweep: %v", err, derr)
			}
			defer c.Close()
			sw, serr := runview.LoadSweep(ctx, c, st, id)
			if serr != nil {
				return fmt.Errorf("%w; as a sweep: %v", err, serr)
			}
			path, err := report.WriteSweep(*out, sw)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s (sweep %s, %d runs)\n", path, id, len(sw.Points))
			return nil
		}
		if err != nil {
			return err
		}
		r := report.Run{Run: rec.Run, Epochs: rec.Epochs, Checkpoints: rec.Checkpoints, Backtests: rec.Backtests}
		evaluateCheckpoints(ctx, e, src, &r, rec, *data)
		path, err := report.WriteRun(*out, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s (run %s, %d epochs)\n", path, id, len(rec.Epochs))
		return nil
	}
	return cmd
}

// evaluateCheckpoints backtests every checkpoint still on disk on the
// validation range: mean Q for each, and for the best one its equity,
// buy-and-hold's and the actions. A file out of reach (another host, a
// pruned blob) is a note in the report, not an error. src reads the data:
// dataFlag, else the run's data.path, which must lie in src's data roots.
func evaluateCheckpoints(ctx context.Context, e *env, src prices.Source, r *report.Run, rec runview.Record, dataFlag string) {
	var cfg struct {
		Data struct {
			Path string `json:"path"`
		} `json:"data"`
	}
	json.Unmarshal(rec.Run.Config, &cfg)
	data := dataFlag
	if data == "" {
		data = cfg.Data.Path
	}
	best := rec.Best()
	if best == nil {
		r.BestNote = "The run has no checkpoint with a validation score yet."
	}
	for _, c := range rec.Checkpoints {
		if c.Pruned {
			continue
		}
		if _, err := os.Stat(c.URI); err != nil {
			if c.IsBest {
				r.BestNote = fmt.Sprintf("The best checkpoint (epoch %d) is not readable here: %v. Run the report on a host that sees the checkpoint storage.", c.Epoch, err)
			}
			continue
		}
		bt, meanQ, err := evaluate(ctx, e, src, c.URI, data, c.IsBest)
		if err != nil {
			fmt.Fprintf(e.stderr, "report: checkpoint of epoch %d: %v\n", c.Epoch, err)
			if c.IsBest {
				r.BestNote = fmt.Sprintf("The best checkpoint (epoch %d) could not be backtested: %v", c.Epoch, err)
			}
			continue
		}
		r.MeanQ = append(r.MeanQ, report.EpochValue{Epoch: c.Epoch, Value: meanQ})
		if c.IsBest {
			bt.Epoch = c.Epoch
			r.Best = bt
			if bt.Notice != "" {
				fmt.Fprintf(e.stdout, "best checkpoint (epoch %d): %s\n", c.Epoch, bt.Notice)
			}
		}
	}
}

// evaluate backtests the checkpoint's greedy policy on the validation
// range of data, recording the mean expected Q of the chosen actions and,
// with path, the equity, buy-and-hold's equity and the actions.
func evaluate(ctx context.Context, e *env, src prices.Source, uri, data string, path bool) (*report.Backtest, float64, error) {
	pol, ds, rng, _, runRec, err := openPolicyData(ctx, e, src, uri, data, "validation", "", "", nil)
	if err != nil {
		return nil, 0, err
	}
	return evaluation.ValidationBacktest(pol, ds, rng, uri, data, path, evaluation.FlatNotice(runRec))
}
