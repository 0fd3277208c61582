package report

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/walkforward/summary"
)

// handWalkForward is a study of two series over two windows of 60 days
// each from 2019-11-02 (so the test days span two calendar years), the
// agent at two seeds and buy-and-hold and momentum baselines, with
// returns drawn from fixed seeds.
func handWalkForward(t *testing.T) (walkforward.Output, summary.Summary) {
	t.Helper()
	day0 := int32(time.Date(2019, 11, 2, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	out := walkforward.Output{Seeds: []uint64{1, 2}, Trials: walkforward.Trials{Study: 1, Prior: 2, Total: 3}}
	g := rand.New(rand.NewPCG(7, 7))
	for w := range 2 {
		for _, s := range []string{"EURUSD", "USDJPY"} {
			for _, k := range []struct {
				strategy string
				seed     uint64
				mu       float64
			}{{walkforward.StrategyAgent, 1, 0.002}, {walkforward.StrategyAgent, 2, 0.001}, {walkforward.StrategyBuyAndHold, 0, 0}, {walkforward.StrategyMomentum, 0, 0.0005}} {
				r := walkforward.Result{Window: w, Series: s, Strategy: k.strategy, Seed: k.seed, InTraining: true, DaysPerYear: 252}
				for i := range 60 {
					r.Days = append(r.Days, day0+int32(60*w+i))
					r.Returns = append(r.Returns, k.mu+0.01*g.NormFloat64())
				}
				out.Results = append(out.Results, r)
			}
		}
	}
	sum, err := summary.Summarize(out.Results, summary.SummaryOptions{Trials: out.Trials.Total, Bootstrap: stats.Bootstrap{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return out, sum
}

// TestWalkForwardReportHasTheTablesAndPlots: index.html holds the
// headline, the portfolio rows with their intervals and the agent's DSR,
// the agent's Sharpe difference with each baseline, a per-series row for each
// series whose agent Sharpe ratio is that of the mean over seeds of its
// returns (computed here), a per-year row for 2019 and 2020, and the
// three plots, inlined and as PNG files that decode.
func TestWalkForwardReportHasTheTablesAndPlots(t *testing.T) {
	dir := t.TempDir()
	study, sum := handWalkForward(t)
	path, err := WriteWalkForward(dir, WalkForward{ID: "wf-test", From: "results.json", Study: study, Summary: sum})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	html := string(raw)
	g := sum.Groups[0]
	cell := func(s string) string { return "<td>" + s + "</td>" }
	want := []string{"Walk-forward wf-test", "Series the agent trained on: portfolios", "DSR",
		cell("agent (mean of 2 seeds)"), cell(fmt.Sprintf("%.2f", g.Agent.Sharpe.Estimate)),
		cell(fmt.Sprintf("[%.2f, %.2f]", g.Agent.Sharpe.Lo, g.Agent.Sharpe.Hi)),
		cell("buy_and_hold"), cell("tsmom"), cell("agent seed 2"),
		cell("2019"), cell("2020"), "vs buy_and_hold", "vs tsmom", "<h2>Headline</h2>"}
	if g.Agent.DSR == nil {
		t.Fatal("the hand-made study's agent has no DSR")
	}
	want = append(want, cell(summary.ProbText(g.Agent.DSR)))
	// html/template writes a + as &#43;.
	for _, c := range g.VsBaselines {
		want = append(want, cell(strings.ReplaceAll(summary.DiffText(c.SharpeDiff), "+", "&#43;")))
	}
	// Each series' agent cell is the Sharpe ratio of the seeds' mean
	// return on each of its days.
	for _, s := range []string{"EURUSD", "USDJPY"} {
		var mean []float64
		for _, r := range study.Results {
			if r.Series != s || r.Strategy != walkforward.StrategyAgent {
				continue
			}
			if r.Seed == 1 {
				mean = append(mean, r.Returns...)
			}
		}
		i := 0
		for _, r := range study.Results {
			if r.Series == s && r.Strategy == walkforward.StrategyAgent && r.Seed == 2 {
				for _, v := range r.Returns {
					mean[i] = (mean[i] + v) / 2
					i++
				}
			}
		}
		sr := stats.Annualise(stats.Sharpe(mean), 252)
		re := regexp.MustCompile(`<tr><td>` + s + `</td><td>yes</td><td>2</td><td>4</td><td>0</td><td>(-?[0-9.]+) \[`)
		m := re.FindStringSubmatch(html)
		if m == nil {
			t.Errorf("index.html has no per-series row of %s", s)
			continue
		}
		if m[1] != fmt.Sprintf("%.2f", sr) {
			t.Errorf("%s: agent Sharpe %s in the per-series table, want %.2f", s, m[1], sr)
		}
		if math.IsNaN(sr) {
			t.Fatalf("%s: reference Sharpe is NaN", s)
		}
	}
	for _, s := range want {
		if !strings.Contains(html, s) {
			t.Errorf("index.html lacks %q", s)
		}
	}
	plots := []string{"training-equity.png", "training-sharpe.png", "training-series-sharpe.png"}
	if n := strings.Count(html, `src="data:image/png;base64,`); n != len(plots) {
		t.Errorf("index.html inlines %d PNGs, want %d", n, len(plots))
	}
	for _, name := range plots {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("plot %s: %v", name, err)
			continue
		}
		if img, err := png.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() < 600 {
			t.Errorf("plot %s does not decode as a wide PNG: %v", name, err)
		}
	}
}
