package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/walkforward/summary"
)

// defaultMaxResultsBytes bounds the results.json that "walkforward
// summarize" reads: a study of 30 series, 20 yearly windows, 8 seeds and
// 4 baselines holds about 3.6 million daily returns, some 80 MB.
const defaultMaxResultsBytes = 1 << 30

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
	maxBytes := fs.Int64("max-bytes", defaultMaxResultsBytes, "largest results.json read, in bytes")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *trials < 0 {
			return fmt.Errorf("%w: --trials %d: must not be negative", errUsage, *trials)
		}
		path := resultsPath(args[0])
		res, err := readStudyJSON(path, *maxBytes)
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
		s, err := writeSummary(filepath.Dir(path), res, headline)
		if err != nil {
			return err
		}
		switch {
		case *jsonOut:
			return printJSON(e, s)
		case *markdown:
			_, err := fmt.Fprint(e.stdout, s.Markdown())
			return err
		}
		return nil
	}
	return cmd
}

// readStudyJSON reads a walk-forward's results.json of at most maxBytes
// bytes; the error names the file and, for bad JSON, the byte offset.
func readStudyJSON(path string, maxBytes int64) (walkforward.Output, error) {
	var res walkforward.Output
	f, err := os.Open(path)
	if err != nil {
		return res, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return res, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > maxBytes {
		return res, fmt.Errorf("read %s: larger than %d bytes (--max-bytes)", path, maxBytes)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return res, fmt.Errorf("read %s: not a walk-forward's results.json: bad JSON at byte %d: %w", path, se.Offset, err)
		case errors.As(err, &te):
			return res, fmt.Errorf("read %s: not a walk-forward's results.json: %s at byte %d: %w", path, te.Field, te.Offset, err)
		}
		return res, fmt.Errorf("read %s: not a walk-forward's results.json: %w", path, err)
	}
	if len(res.Results) == 0 {
		return res, fmt.Errorf("read %s: no results: not a walk-forward's results.json, or a study that produced none", path)
	}
	return res, nil
}

// summarizeStudy is summary.Summarize of a study, with the trials it
// records and its config's seed for the bootstrap: the one summary that
// summary.json and the report both show.
func summarizeStudy(res walkforward.Output) (summary.Summary, error) {
	return summary.Summarize(res.Results, summary.SummaryOptions{Trials: res.Trials.Total, Bootstrap: stats.Bootstrap{Seed: res.Config.Seed}})
}

// writeSummary summarises a study (summarizeStudy), writes
// summary.json and summary.md to dir and prints the headline to w.
func writeSummary(dir string, res walkforward.Output, w io.Writer) (summary.Summary, error) {
	s, err := summarizeStudy(res)
	if err != nil {
		return s, err
	}
	jsonPath, mdPath := filepath.Join(dir, "summary.json"), filepath.Join(dir, "summary.md")
	if err := writeJSONFile(jsonPath, s); err != nil {
		return s, err
	}
	tmp := mdPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.Markdown()), 0o644); err != nil {
		return s, fmt.Errorf("write %s: %w", mdPath, err)
	}
	if err := os.Rename(tmp, mdPath); err != nil {
		return s, fmt.Errorf("write %s: %w", mdPath, err)
	}
	fmt.Fprintf(w, "%sthe summary's tables are in %s (and %s)\n", s.Headline(), mdPath, jsonPath)
	return s, nil
}
