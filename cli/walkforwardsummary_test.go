package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/walkforward/summary"
)

// handStudy writes to dir the results.json of a hand-made study: two
// series, two windows of 30 days, the agent at one seed and buy-and-hold,
// 7 configurations tried.
func handStudy(t *testing.T, dir string) string {
	t.Helper()
	res := walkforward.Output{Seeds: []uint64{1}, Trials: walkforward.Trials{Study: 1, Prior: 6, Total: 7}}
	for w := range 2 {
		for k, s := range []string{"EURUSD_H4", "GBPUSD_H4"} {
			for _, st := range []string{walkforward.StrategyAgent, walkforward.StrategyBuyAndHold} {
				r := walkforward.Result{Window: w, Series: s, Strategy: st, InTraining: true, DaysPerYear: 260}
				if st == walkforward.StrategyAgent {
					r.Seed = 1
				}
				for i := range 30 {
					r.Days = append(r.Days, int32(16500+30*w+i))
					r.Returns = append(r.Returns, 0.01*math.Sin(float64(7*i+3*k+w+len(st)))+0.001)
				}
				res.Results = append(res.Results, r)
			}
		}
	}
	path := filepath.Join(dir, "results.json")
	if err := writeStudyJSON(path, res); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWalkForwardSummarizeWritesTheSummaryBesideTheResults: "walkforward
// summarize DIR" reads DIR/results.json, writes summary.json (with the
// trials results.json records) and summary.md, and prints the headline;
// --json prints the summary, --trials overrides the count; a file of bad
// JSON, one over --max-bytes and a missing one are errors naming it.
func TestWalkForwardSummarizeWritesTheSummaryBesideTheResults(t *testing.T) {
	dir := t.TempDir()
	path := handStudy(t, dir)
	out, errOut, code := run(t, "walkforward", "summarize", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"agent portfolio (mean of 1 seeds) Sharpe", "DSR", "(7 trials)", "vs buy_and_hold", "summary.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("headline has no %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Options.Trials != 7 || len(s.Groups) != 1 || s.Groups[0].Agent.Days != 40 || s.Counts.AgentRuns != 4 {
		t.Errorf("summary.json: trials %d, %d groups, counts %+v; want 7 trials, one group of 40 days (60 less the 20 of the volatility warm-up), 4 agent runs", s.Options.Trials, len(s.Groups), s.Counts)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Walk-forward summary", "| agent, mean of seeds |", "| EURUSD_H4 (0 of 2 runs abstained) |", "### Per year"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md has no %q:\n%s", want, md)
		}
	}

	out, errOut, code = run(t, "walkforward", "summarize", path, "--json", "--trials", "40")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	var s40 summary.Summary
	if err := json.Unmarshal([]byte(out), &s40); err != nil {
		t.Fatalf("--json printed no summary: %v\n%s", err, out)
	}
	if s40.Options.Trials != 40 || *s40.Groups[0].Agent.DSR >= *s.Groups[0].Agent.DSR {
		t.Errorf("--trials 40: trials %d, DSR %v; want 40 and below the DSR of 7 trials, %v", s40.Options.Trials, *s40.Groups[0].Agent.DSR, *s.Groups[0].Agent.DSR)
	}

	bad := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(bad, []byte(`{"results": [{"window": 0,}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		code  int
		parts []string
	}{
		{[]string{bad}, 1, []string{bad, "bad JSON at byte"}},
		{[]string{path, "--max-bytes", "100"}, 1, []string{path, "larger than 100 bytes"}},
		{[]string{filepath.Join(dir, "absent.json")}, 1, []string{"absent.json"}},
		{nil, 2, []string{"walkforward summarize DIR_OR_FILE"}},
	} {
		_, errOut, code := run(t, append([]string{"walkforward", "summarize"}, c.args...)...)
		if code != c.code {
			t.Errorf("summarize %v: exit %d, want %d: %s", c.args, code, c.code, errOut)
		}
		for _, p := range c.parts {
			if !strings.Contains(errOut, p) {
				t.Errorf("summarize %v: %q does not say %q", c.args, errOut, p)
			}
		}
	}
}
