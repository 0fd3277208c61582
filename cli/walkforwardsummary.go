package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/spf13/cobra"
)

// walkForwardSummarizeCmd is "dqnflow walkforward summarize DIR_OR_FILE":
// summary.Summarize of a results.json already written.
func walkForwardSummarizeCmd(e *env) *cobra.Command {
	cmd := leaf("summarize DIR_OR_FILE",
		"the headline statistics of a walk-forward's results.json: portfolio Sharpe ratios with intervals, DSR, against each baseline",
		"summarize reads a walk-forward's results.json (DIR/results.json, or the file named) and writes summary.json and summary.md beside it: "+
			"per group of series (those the agent trained on, those left out), the portfolio across series of the agent's mean over seeds, of each seed and of each baseline "+
			"with Sharpe ratios, block-bootstrap 95 % intervals, t-statistics, the deflated Sharpe ratio over the configurations tried (results.json's trials.total), "+
			"drawdowns, turnover and costs; the agent's Sharpe difference with each baseline on the same days; per-series and per-year tables; the shares of windows and series it wins. "+
			"It prints the headline, or the whole summary with --json.",
		"dqnflow walkforward summarize runs/wf",
		"dqnflow walkforward summarize runs/wf/results.json --json | jq '.groups[0].agent.sharpe'")
	fs := cmd.Flags()
	jsonOut := fs.Bool("json", false, "print the whole summary (summary.json) instead of the headline")
	markdown := fs.Bool("markdown", false, "print summary.md instead of the headline")
	trials := fs.Int("trials", 0, "configurations tried, for the deflated Sharpe ratio (default: results.json's trials.total)")
	maxBytes := fs.Int64("max-bytes", wfrun.DefaultMaxBytes, "largest results.json read, in bytes")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *trials < 0 {
			return fmt.Errorf("%w: --trials %d: must not be negative", errUsage, *trials)
		}
		path := wfrun.ResultsPath(args[0])
		res, err := wfrun.Read(path, *maxBytes)
		if err != nil {
			return err
		}
		if *trials > 0 {
			res.Trials.Total = *trials
		}
		headline := e.stdout
		if *jsonOut || *markdown {
			headline = io.Discard
		}
		s, err := wfrun.WriteSummary(filepath.Dir(path), res, headline)
		if err != nil {
			return err
		}
		switch {
		case *jsonOut:
			return jsonfile.Print(e.stdout, s)
		case *markdown:
			_, err := fmt.Fprint(e.stdout, s.Markdown())
			return err
		}
		return nil
	}
	return cmd
}
