package cli

import (
	"context"
	"fmt"
	"slices"

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
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// backtestCmd is "dqnflow backtest".
func backtestCmd(e *env) *cobra.Command {
	cmd := leaf("backtest",
		"greedy backtest of a checkpoint on a price file",
		"backtest runs a checkpoint's greedy policy on a price file and reports it beside buy-and-hold and flat. On the run's own training data it takes the test range by default (--range); on another file, every bar with full feature history.",
		"dqnflow backtest --checkpoint runs/local/epoch-000005.safetensors --data bundled:USA500IDXUSD_H1.csv",
		"dqnflow backtest --checkpoint ck.safetensors --data prices.csv --from 2024-01-01 --to 2024-07-01 --json",
		"dqnflow backtest --checkpoint runs/panel/epoch-000005.safetensors   # a panel run's: every series of its panel and their portfolio")
	fs := cmd.Flags()
	ckPath := fs.String("checkpoint", "", "checkpoint file (.safetensors)")
	dataPath := fs.String("data", "", "price CSV file or bundled:NAME (default, for a panel run's checkpoint only: every series of its panel)")
	allowChanged := fs.Bool("allow-changed-data", false, "a panel run's checkpoint without --data: backtest even when a series' file no longer has the SHA-256 (or the ranges) the checkpoint recorded, with a warning")
	rangeName := fs.String("range", "test", "on the run's training data: test, validation or all (ignored on another file, which is used whole)")
	flagValues(fs, "range", "test", "validation", "all")
	from := fs.String("from", "", "first bar time (overrides --range)")
	to := fs.String("to", "", "end time, exclusive (overrides --range)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	costs := addCostFlags(fs)
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := required(fs, "checkpoint"); err != nil {
			return err
		}
		src, err := df.source(*dataPath)
		if err != nil {
			return err
		}
		if *dataPath == "" {
			if *from != "" || *to != "" {
				return fmt.Errorf("%w: --from/--to need --data", errUsage)
			}
			return backtestPanel(cmd.Context(), e, src, *ckPath, *rangeName, *allowChanged, *jsonOut)
		}
		pol, ds, r, what, rec, err := openPolicyData(cmd.Context(), e, src, *ckPath, *dataPath, *rangeName, *from, *to, costs.edit())
		if err != nil {
			return err
		}
		rep, err := pol.Backtest(ds, r)
		if err != nil {
			return fmt.Errorf("backtest %s on %s: %w", *ckPath, *dataPath, err)
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, backtestResult{Report: rep, Recommendation: rec, Notice: evaluation.FlatNotice(rec)})
		}
		fmt.Fprintf(e.stdout, "%s; instrument %s\n", what, localrun.DescribeInstrument(ds))
		if n := evaluation.FlatNotice(rec); n != "" {
			fmt.Fprintln(e.stdout, n)
		}
		report.PrintBacktest(e.stdout, rep)
		return nil
	}
	return cmd
}

// backtestResult is what "dqnflow backtest --json" prints: the report and,
// when the checkpoint's run recorded one, its recommendation; Notice is
// flatNotice's sentence when that was to stay flat.
type backtestResult struct {
	sim.Report
	Recommendation *checkpoint.Recommendation `json:"run_recommendation,omitempty"`
	Notice         string                     `json:"notice,omitempty"`
}

// openPolicyData reads the checkpoint at ckPath with the command's
// checkpoint flags and opens its policy on dataPath over rangeName, from
// and to (evaluation.OpenPolicyData); src reads the data.
func openPolicyData(ctx context.Context, e *env, src prices.Source, ckPath, dataPath, rangeName, from, to string, costs func(*config.EnvConfig)) (*policy.Policy, *market.Dataset, market.Range, string, *checkpoint.Recommendation, error) {
	if rangeName != "test" && rangeName != "validation" && rangeName != "all" {
		return nil, nil, market.Range{}, "", nil, fmt.Errorf("%w: flag --range %q: want test, validation or all", errUsage, rangeName)
	}
	ck, _, err := readCheckpoint(ctx, e, ckPath)
	if err != nil {
		return nil, nil, market.Range{}, "", nil, err
	}
	pd, err := evaluation.OpenPolicyData(ctx, src, ck, ckPath, dataPath, rangeName, from, to, costs)
	return pd.Policy, pd.Dataset, pd.Range, pd.What, pd.Recommendation, err
}

// backtestPanel backtests the checkpoint at ckPath, a panel run's, on
// every series of its panel over rangeName of each (evaluation.BacktestPanel)
// and prints the result.
func backtestPanel(ctx context.Context, e *env, src prices.Source, ckPath, rangeName string, allowChanged, jsonOut bool) error {
	if !slices.Contains([]string{"test", "validation", "all"}, rangeName) {
		return fmt.Errorf("%w: flag --range %q: want test, validation or all", errUsage, rangeName)
	}
	ck, _, err := readCheckpoint(ctx, e, ckPath)
	if err != nil {
		return err
	}
	res, err := evaluation.BacktestPanel(ctx, e.stderr, src, ck, ckPath, rangeName, allowChanged)
	if err != nil {
		return err
	}
	if jsonOut {
		return jsonfile.Print(e.stdout, res)
	}
	res.Print(e.stdout)
	return nil
}

// predictCmd is "dqnflow predict": one JSON object per bar with its
// normalised features and the expected Q of every action of every branch,
// evaluated with the agent flat (no position), and the greedy action.
func predictCmd(e *env) *cobra.Command {
	cmd := leaf("predict",
		"features and Q values per bar, as JSON",
		"predict prints, for every bar of a price file, the normalised features and the expected Q of every action of every branch (the agent flat, no position), and the greedy action, as one JSON document.",
		"dqnflow predict --checkpoint ck.safetensors --data prices.csv --from 2024-09-01 --json > q.json")
	fs := cmd.Flags()
	ckPath := fs.String("checkpoint", "", "checkpoint file (.safetensors)")
	dataPath := fs.String("data", "", "price CSV file or bundled:NAME")
	from := fs.String("from", "", "first bar time (default: first bar with full feature history)")
	to := fs.String("to", "", "end time, exclusive (default: the last bar)")
	jsonOut := fs.Bool("json", true, "print JSON (the only format)")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if err := required(fs, "checkpoint", "data"); err != nil {
			return err
		}
		src, err := df.source(*dataPath)
		if err != nil {
			return err
		}
		if !*jsonOut {
			return fmt.Errorf("%w: predict prints JSON only", errUsage)
		}
		// predict covers the whole file unless --from/--to narrow it.
		pol, ds, r, _, _, err := openPolicyData(ctx, e, src, *ckPath, *dataPath, "all", *from, *to, nil)
		if err != nil {
			return err
		}
		if *from == "" {
			r.From = ds.Warmup
		}
		if *to == "" {
			r.To = ds.Bars.Len()
		}
		return evaluation.Predict(ctx, e.stdout, pol, ds, r, *ckPath, *dataPath)
	}
	return cmd
}
