// Package wfrun drives the calendar walk-forward studies of package
// walkforward for the command line: a study run in this process (Local),
// its results.json written and read (WriteJSON, Read), summarised
// (WriteSummary), recorded in the metadata store (Record, StudyOutput),
// and the resumption of a study on Temporal checked (CheckResume). The
// research itself is package walkforward's.
package wfrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/walkforward"
)

// LocalOptions say where a local study writes.
type LocalOptions struct {
	// Out is the directory of results.json and the summary; Device the
	// backend's summary, recorded in the results.
	Out, Device string
	// Stdout receives the table (or, with JSON, the whole result) and
	// the headline; Stderr the progress.
	Stdout, Stderr io.Writer
	JSON           bool
}

// Local runs st in this process, writes results.json, summary.json and
// summary.md under o.Out, and prints the table and the headline. An
// interrupted study (Ctrl-C, SIGTERM) keeps the windows it finished:
// they are written, and Local still returns the error.
func Local(ctx context.Context, st *walkforward.Study, o LocalOptions) error {
	res, err := st.Run(ctx)
	interrupted := errors.Is(err, walkforward.ErrInterrupted) && len(res.Results) > 0
	if err != nil && !interrupted {
		return err
	}
	res.Device = o.Device
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	path := filepath.Join(o.Out, "results.json")
	if err := WriteJSON(path, res); err != nil {
		return err
	}
	if interrupted {
		fmt.Fprintf(o.Stderr, "study: %s; the results of the windows done are in %s\n", res.Stopped, path)
		if _, serr := WriteSummary(o.Out, res, o.Stderr); serr != nil {
			fmt.Fprintf(o.Stderr, "study: no summary of the windows done: %v\n", serr)
		}
		return err
	}
	fmt.Fprintf(o.Stderr, "study: %.1fs in all; every result in %s\n", res.Seconds, path)
	// The headline goes after the table, or to stderr beside --json.
	headline := o.Stdout
	if o.JSON {
		headline = o.Stderr
	} else {
		Print(o.Stdout, res)
	}
	if _, err := WriteSummary(o.Out, res, headline); err != nil {
		return fmt.Errorf("summary of %s (kept: \"dqnflow walkforward summarize %s\" retries it): %w", path, o.Out, err)
	}
	if o.JSON {
		return jsonfile.Print(o.Stdout, res)
	}
	return nil
}

// WriteJSON writes res to path compactly, one result a line: the
// daily returns of thousands of results, indented a number a line, would
// take several times the space.
func WriteJSON(path string, res walkforward.Output) error {
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

// ParseLeaveOut reads --leave-out: "" none, a share ("25%", "0.25") of
// names picked by walkforward.LeaveOutSplit with seed, or names.
func ParseLeaveOut(s string, names []string, seed uint64) ([]string, error) {
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

// Print prints, per series and strategy, the mean over windows (and
// seeds) of the test blocks' annualised daily Sharpe ratios and total
// returns: a minimal table. The study's statistics (the equal-risk
// portfolio, per year, intervals of the joined records, the deflated
// Sharpe ratio, shares of wins) are summary.Summarize's.
func Print(w io.Writer, res walkforward.Output) {
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
