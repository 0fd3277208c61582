package cli

import (
	"context"
	"errors"
	"fmt"

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
		evaluation.RunCheckpoints(e.stdout, e.stderr, &r, rec, *data, openValidation(ctx, e, src))
		path, err := report.WriteRun(*out, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s (run %s, %d epochs)\n", path, id, len(rec.Epochs))
		return nil
	}
	return cmd
}

// openValidation opens the checkpoint at uri, with the command's
// checkpoint flags, on the validation range of data
// (evaluation.OpenPolicyData); src reads the data.
func openValidation(ctx context.Context, e *env, src prices.Source) func(uri, data string) (evaluation.PolicyData, error) {
	return func(uri, data string) (evaluation.PolicyData, error) {
		pol, ds, rng, what, rec, err := openPolicyData(ctx, e, src, uri, data, "validation", "", "", nil)
		return evaluation.PolicyData{Policy: pol, Dataset: ds, Range: rng, What: what, Recommendation: rec}, err
	}
}
