package cli

import (
	"fmt"
	"io"

	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/research/baselines"
	"github.com/spf13/cobra"
)

// baselinesCmd is "dqnflow baselines": simple rules chosen on the
// validation range of bar-count windows, against which the agent is
// judged (package baselines). No training: it takes seconds.
func baselinesCmd(e *env) *cobra.Command {
	cmd := leaf("baselines",
		"simple rules on bar-count windows of one series, no training",
		"baselines runs momentum and reversal rules on consecutive bar-count windows at the end of one series, each chosen on the window's validation range, and reports their test metrics per window and joined: the yardstick of the agent.",
		"dqnflow baselines --data bundled:USA500IDXUSD_H1.csv            # four windows, momentum and reversal chosen on validation",
		"dqnflow baselines --data bundled:bitcoin_2024.csv --lookbacks 6,24,120 --json")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults); its data and env sections apply")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	k := fs.Int("windows", 4, "number of consecutive windows")
	testBars := fs.Int("test-bars", 0, "test bars per window (default: 30% of the bars after the feature warmup, split over the windows)")
	validBars := fs.Int("valid-bars", 0, "validation bars per window (default: --test-bars)")
	trainBars := fs.Int("train-bars", 0, "training bars per window (default 0: every earlier bar); rules do not train, but the instrument's point value comes from the last training bar, as in a run")
	lookbacks := fs.String("lookbacks", baselines.JoinInts(sim.DefaultLookbacks), "lookbacks of the rules, in bars, comma-separated")
	out := fs.String("out", "", "also write the result as JSON to this file")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	df := addDataFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		cfg, err := loadConfig(fs, *cfgPath, "", *dataPath, 0)
		if err != nil {
			return err
		}
		src, err := df.source(*dataPath)
		if err != nil {
			return err
		}
		b, err := market.Load(ctx, src, cfg)
		if err != nil {
			return err
		}
		lbs, err := sim.ParseLookbacks(*lookbacks, b.Len())
		if err != nil {
			return fmt.Errorf("%w: --lookbacks %q: %v", errUsage, *lookbacks, err)
		}
		ws, err := baselines.Layout(b, cfg, *k, testBars, validBars, *trainBars)
		if err != nil {
			return err
		}
		res, err := baselines.Rules(ctx, src, cfg, b, ws, lbs, *validBars > *testBars)
		if err != nil {
			return err
		}
		if *out != "" {
			if err := jsonfile.Write(*out, res); err != nil {
				return err
			}
		}
		return printResult(e, nil, *jsonOut, res, func(w io.Writer, res baselines.Result) { baselines.Print(w, cfg, b, res) })
	}
	return cmd
}
