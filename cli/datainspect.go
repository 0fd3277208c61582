package cli

import (
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/research/datainspect"
	"github.com/spf13/cobra"
)

// dataCmd is "dqnflow data": what a price file holds.
func dataCmd(e *env) *cobra.Command {
	return group("data", "price files: what they hold, whether a run can use them",
		"data inspects price files before a run trusts them.", dataInspectCmd(e))
}

// dataInspectCmd is "dqnflow data inspect".
func dataInspectCmd(e *env) *cobra.Command {
	cmd := leaf("inspect PATH...",
		"what each price file holds: format, bars, bar size, gaps, jumps, spread, usable or not",
		"inspect reads each price file as a run would (the format found from its content: tab- or comma-separated text with or without a header, a LEAN equity or forex zip, Parquet) and reports the format, the bars and their first and last times, the bar size (median spacing), the gaps (spacings at least two bars longer than usual for their weekday and hour, so that a market's nightly and weekend closures are none), the longest gap, suspected splits or bad ticks (close-to-close log returns beyond --jump-sigma robust standard deviations, σ = 1.4826 × MAD), the spread in basis points where the file has bid and ask, whether a LEAN equity was adjusted for splits and dividends, and whether the file is usable: it loads within the data limits and the config (--config, else the defaults) prepares a dataset of it. It exits 1 when any file is unusable; a directory is skipped. Paths typed here are read wherever they are, with the LEAN factor files beside them.",
		"dqnflow data inspect ../shared/data/corpus/hourly/*.csv",
		"dqnflow data inspect --json prices.parquet lean/equity-aapl.zip")
	cmd.Args = argsBetween(1, math.MaxInt)
	fs := cmd.Flags()
	jsonOut := fs.Bool("json", false, "print a JSON array, one object per file")
	jumpSigma := fs.Float64("jump-sigma", 10, "a jump is a close-to-close log return farther than this many robust standard deviations from the median")
	cfgPath := fs.String("config", "", "the run config a file must suit (default: the defaults)")
	df := addDataFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !(*jumpSigma > 0) {
			return fmt.Errorf("%w: flag --jump-sigma %v: want a positive number", errUsage, *jumpSigma)
		}
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return fmt.Errorf("%w: flag --config: %v", errUsage, err)
		}
		src, err := df.source(args...)
		if err != nil {
			return err
		}
		var results []datainspect.Result
		bad := 0
		for _, p := range args {
			r := datainspect.File(cmd.Context(), src, cfg, p, *jumpSigma)
			if !r.Usable && r.Skipped == "" {
				bad++
			}
			results = append(results, r)
		}
		if *jsonOut {
			if err := jsonfile.Print(e.stdout, results); err != nil {
				return err
			}
		} else {
			for _, r := range results {
				datainspect.Print(e.stdout, r)
			}
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d paths unusable", bad, len(results))
		}
		return nil
	}
	return cmd
}
