package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/walkforward"
)

// walkForwardCmd is "dqnflow walkforward": the calendar walk-forward
// study of package walkforward over a set of series (ADR 0038). The
// research logic lives there; this command reads the flags, runs the
// study in this process (no Temporal), writes results.json and prints a
// per-series table.
func walkForwardCmd(e *env) *cobra.Command {
	cmd := leaf("walkforward",
		"calendar walk-forward over a set of series: the agent at several seeds and the baselines, per window and series",
		"walkforward lays calendar windows over the series (train on everything before a date, validate on the next block, test on the block after, rolled forward by --step), "+
			"trains the agent once per seed on each window's training ranges, backtests it and the baselines (flat, buy-and-hold, time-series momentum chosen on the training range, "+
			"the best simple rule chosen on validation) on every test block with the same costs and sizing, and writes every result to DIR/results.json. "+
			"A run whose validation t is below backtest.min_valid_t abstains and is flat (ADR 0016; --gate none trades it anyway). "+
			"Each window's timings per phase go to stderr.",
		"dqnflow walkforward --series '../shared/data/corpus/h4-forex/*.csv' --device cuda --out runs/wf",
		"dqnflow walkforward --series 'data/EURUSD_H4.csv,data/GBPUSD_H4.csv' --step 6mo --test 6mo --valid 3mo --seeds 8 --leave-out GBPUSD_H4",
		"dqnflow walkforward --config panel.json --leave-out 25% --prior-trials 12 --json")
	fs := cmd.Flags()
	sf := addStudyFlags(fs)
	out := fs.String("out", "", "directory for results.json (and --checkpoints) (default: runs/<id>)")
	keep := fs.Bool("checkpoints", false, "also write each run's chosen checkpoint under --out (window-N/SERIES/seed-S.safetensors)")
	jsonOut := fs.Bool("json", false, "print the whole result (results.json) instead of the table")
	maxTime := fs.Duration("max-time", 0, "end the study within this wall time (e.g. 7m): no window starts that would end after it (a window is expected to take as long as the one before); the windows done are written, results.json's stopped says so (0: no limit)")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		st, typed, err := sf.study()
		if err != nil {
			return err
		}
		src, err := df.source(typed...)
		if err != nil {
			return err
		}
		if *maxTime < 0 {
			return fmt.Errorf("%w: --max-time %s: must not be negative", errUsage, *maxTime)
		}
		opt, err := e.ckpt.options()
		if err != nil {
			return err
		}
		be, dev, err := openBackend(e, st.Config.Device)
		if err != nil {
			return err
		}
		id := newRunID("walkforward")
		if *out == "" {
			*out = filepath.Join("runs", id)
		}
		st.Source, st.Train, st.Log = src, walkforward.LocalTrainer(be, opt, e.stderr), e.stderr
		if *keep {
			st.Dir = *out
		}
		if *maxTime > 0 {
			st.Deadline = time.Now().Add(*maxTime)
		}
		res, err := st.Run(ctx)
		// An interrupted study (Ctrl-C, SIGTERM) keeps the windows it
		// finished: they are written, and the command still fails.
		interrupted := errors.Is(err, walkforward.ErrInterrupted) && len(res.Results) > 0
		if err != nil && !interrupted {
			return err
		}
		res.Device = dev
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		path := filepath.Join(*out, "results.json")
		if err := writeStudyJSON(path, res); err != nil {
			return err
		}
		if interrupted {
			fmt.Fprintf(e.stderr, "study: %s; the results of the windows done are in %s\n", res.Stopped, path)
			if _, serr := writeSummary(*out, res, e.stderr); serr != nil {
				fmt.Fprintf(e.stderr, "study: no summary of the windows done: %v\n", serr)
			}
			return err
		}
		fmt.Fprintf(e.stderr, "study: %.1fs in all; every result in %s\n", res.Seconds, path)
		// The headline goes after the table, or to stderr beside --json.
		headline := e.stdout
		if *jsonOut {
			headline = e.stderr
		} else {
			printStudy(e, res)
		}
		if _, err := writeSummary(*out, res, headline); err != nil {
			return fmt.Errorf("summary of %s (kept: \"dqnflow walkforward summarize %s\" retries it): %w", path, *out, err)
		}
		if *jsonOut {
			return printJSON(e, res)
		}
		return nil
	}
	cmd.AddCommand(walkForwardSummarizeCmd(e), walkForwardRecordCmd(e), walkForwardStartCmd(e))
	return cmd
}

// writeStudyJSON writes res to path compactly, one result a line: the
// daily returns of thousands of results, indented a number a line, would
// take several times the space.
func writeStudyJSON(path string, res walkforward.Output) error {
	results := res.Results
	res.Results = nil
	head, err := json.Marshal(res)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1]) // without the closing brace
	b.WriteString(`,"results":[`)
	for i, r := range results {
		line, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("result %d: %w", i, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// parseLeaveOut reads --leave-out: "" none, a share ("25%", "0.25") of
// names picked by walkforward.LeaveOutSplit with seed, or names.
func parseLeaveOut(s string, names []string, seed uint64) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	pct, isPct := strings.CutSuffix(s, "%")
	if f, err := strconv.ParseFloat(pct, 64); err == nil {
		if isPct {
			f /= 100
		}
		if !(f > 0 && f < 1) {
			return nil, fmt.Errorf("a share must lie strictly between 0 and 1 (0%% and 100%%)")
		}
		return walkforward.LeaveOutSplit(names, f, seed), nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("%q is not a series of the study (%s)", n, strings.Join(names, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// printStudy prints, per series and strategy, the mean over windows (and
// seeds) of the test blocks' annualised daily Sharpe ratios and total
// returns: a minimal table. The study's statistics (the equal-risk
// portfolio, per year, intervals of the joined records, the deflated
// Sharpe ratio, shares of wins) are summary.Summarize's.
func printStudy(e *env, res walkforward.Output) {
	w := e.stdout
	in := 0
	for _, sw := range res.Plan {
		if sw.Skip == "" {
			in++
		}
	}
	fmt.Fprintf(w, "walk-forward: %d series, %d windows (%d window × series take part), seeds %v, gate %s, %d configuration(s) tried; %s\n",
		len(res.Series), len(res.Windows), in, res.Seeds, res.Gate, res.Trials.Total, res.Device)
	left := map[string]bool{}
	for _, n := range res.LeaveOut {
		left[n] = true
	}
	strategies := []string{walkforward.StrategyAgent, walkforward.StrategyFlat, walkforward.StrategyBuyAndHold, walkforward.StrategyMomentum, walkforward.StrategyBestRule}
	type cell struct {
		n, abstained      int
		sharpe, ret, cost float64
	}
	cells := map[[2]string]*cell{}
	for _, r := range res.Results {
		k := [2]string{r.Series, r.Strategy}
		c := cells[k]
		if c == nil {
			c = &cell{}
			cells[k] = c
		}
		c.n++
		c.sharpe += r.Sharpe
		c.ret += r.TotalReturn
		c.cost += r.Costs
		if r.Detail == walkforward.DetailAbstained {
			c.abstained++
		}
	}
	fmt.Fprintf(w, "mean over the test blocks (and seeds) of each block's annualised daily Sharpe ratio, total return in %%, [agent runs that abstained]:\n")
	fmt.Fprintf(w, "%-22s", "series")
	for _, s := range strategies {
		fmt.Fprintf(w, " %22s", s)
	}
	fmt.Fprintln(w)
	for _, sp := range res.Series {
		name := sp.Name
		if left[name] {
			name += " (left out)"
		}
		fmt.Fprintf(w, "%-22s", name)
		for _, s := range strategies {
			c := cells[[2]string{sp.Name, s}]
			switch {
			case c == nil:
				fmt.Fprintf(w, " %22s", "-")
			case s == walkforward.StrategyAgent:
				fmt.Fprintf(w, " %22s", fmt.Sprintf("%.2f %+.1f%% [%d/%d]", c.sharpe/float64(c.n), 100*c.ret/float64(c.n), c.abstained, c.n))
			default:
				fmt.Fprintf(w, " %22s", fmt.Sprintf("%.2f %+.1f%%", c.sharpe/float64(c.n), 100*c.ret/float64(c.n)))
			}
		}
		fmt.Fprintln(w)
	}
	for _, sw := range res.Plan {
		if sw.Skip != "" {
			fmt.Fprintf(w, "window %d: %s sits out: %s\n", sw.Window, sw.Series, sw.Skip)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, n)
	}
}
