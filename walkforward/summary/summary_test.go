package summary

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
)

// day0 is 2015-01-05, the first test day of the hand-made studies.
var day0 = int32(time.Date(2015, 1, 5, 0, 0, 0, 0, time.UTC).Unix() / 86400)

// row is a hand-made Result: strategy (seed) on series over window w,
// one return a day from day0+from on, 252 days a year.
func row(w int, series, strategy string, seed uint64, in bool, from int, rets []float64) walkforward.Result {
	r := walkforward.Result{Window: w, Series: series, Strategy: strategy, Seed: seed, InTraining: in, DaysPerYear: 252, Returns: rets}
	for i := range rets {
		r.Days = append(r.Days, day0+int32(from+i))
	}
	return r
}

// noise is n returns of mean mu and standard deviation sd from seed.
func noise(seed uint64, n int, mu, sd float64) []float64 {
	g := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = mu + sd*g.NormFloat64()
	}
	return out
}

// add is a + b elementwise.
func add(a []float64, c float64) []float64 {
	out := slices.Clone(a)
	for i := range out {
		out[i] += c
	}
	return out
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// group is the summary's group name, failing the test without it.
func group(t *testing.T, s Summary, name string) Group {
	t.Helper()
	for _, g := range s.Groups {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("summary has no group %q (groups %d)", name, len(s.Groups))
	return Group{}
}

// compounded is Π(1 + r) − 1 and the maximum drawdown of the compounded
// curve, the independent reference of the portfolio's figures.
func compounded(r []float64) (total, dd float64) {
	eq := []float64{1}
	for _, v := range r {
		eq = append(eq, eq[len(eq)-1]*(1+v))
	}
	return eq[len(eq)-1] - 1, sim.MaxDrawdown(eq)
}

// TestSummaryEqualPortfolioIsTheMeanOfTwoSeries: with equal weights the
// portfolio of series A and B on each day is (a + b)/2, and its Sharpe
// ratio, total return and drawdown are those of that series, computed
// here from the mean.
func TestSummaryEqualPortfolioIsTheMeanOfTwoSeries(t *testing.T) {
	a, b := noise(1, 40, 0.001, 0.01), noise(2, 40, 0.0005, 0.02)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, a),
		row(0, "B", walkforward.StrategyAgent, 1, true, 0, b),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, noise(3, 40, 0, 0.01)),
		row(0, "B", walkforward.StrategyBuyAndHold, 0, true, 0, noise(4, 40, 0, 0.01)),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1, Weights: WeightsEqual})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	mean := make([]float64, 40)
	for i := range mean {
		mean[i] = (a[i] + b[i]) / 2
	}
	total, dd := compounded(mean)
	want := stats.Annualise(stats.Sharpe(mean), 252)
	if g.Agent.Days != 40 || !near(g.Agent.Sharpe.Estimate, want, 1e-12) || !near(g.Agent.TotalReturn, total, 1e-12) || !near(g.Agent.MaxDrawdown, dd, 1e-12) {
		t.Errorf("agent portfolio: %d days, Sharpe %v, total %v, drawdown %v; want 40, %v, %v, %v",
			g.Agent.Days, g.Agent.Sharpe.Estimate, g.Agent.TotalReturn, g.Agent.MaxDrawdown, want, total, dd)
	}
	if !(g.Agent.Sharpe.Lo < want && want < g.Agent.Sharpe.Hi) || g.Agent.Sharpe.Resamples != stats.DefaultResamples {
		t.Errorf("interval %+v does not hold its estimate %v", g.Agent.Sharpe, want)
	}
	if e, _ := stats.EstimateSharpe(mean); !near(g.Agent.T, e.TStat(), 1e-9) {
		t.Errorf("t %v, want %v", g.Agent.T, e.TStat())
	}
	if len(g.PerSeries) != 2 || !near(g.PerSeries[1].Agent.Sharpe.Estimate, stats.Annualise(stats.Sharpe(b), 252), 1e-12) {
		t.Errorf("per series %+v: want A and B, B's Sharpe that of b", g.PerSeries)
	}
}

// TestSummaryInverseVolWeightsComeFromThePast: buy-and-hold on A
// alternates ±1 % and on B ±2 %, so with a two-day window from day 2 on
// σ_A = √2 %, σ_B = 2√2 %: weights 2 : 1, the portfolio (2a + b)/3.
// Days 0 and 1 of both series are the warm-up (4 series-days).
func TestSummaryInverseVolWeightsComeFromThePast(t *testing.T) {
	n := 30
	alt := func(x float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = x * float64(1-2*(i%2))
		}
		return out
	}
	a, b := noise(5, n, 0.001, 0.01), noise(6, n, 0, 0.02)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, a), row(0, "B", walkforward.StrategyAgent, 1, true, 0, b),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, alt(0.01)), row(0, "B", walkforward.StrategyBuyAndHold, 0, true, 0, alt(0.02)),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1, VolDays: 2, VolMinDays: 2})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	var want []float64
	for i := 2; i < n; i++ {
		want = append(want, (2*a[i]+b[i])/3)
	}
	total, _ := compounded(want)
	if g.Agent.Days != n-2 || g.WarmupCells != 4 || !near(g.Agent.TotalReturn, total, 1e-12) ||
		!near(g.Agent.Sharpe.Estimate, stats.Annualise(stats.Sharpe(want), 252), 1e-9) {
		t.Errorf("agent portfolio: %d days, warm-up %d, total %v, Sharpe %v; want %d, 4, %v, %v",
			g.Agent.Days, g.WarmupCells, g.Agent.TotalReturn, g.Agent.Sharpe.Estimate, n-2, total, stats.Annualise(stats.Sharpe(want), 252))
	}
	if g.From != dayString(day0+2) {
		t.Errorf("portfolio from %s, want %s (after the warm-up)", g.From, dayString(day0+2))
	}
}

// TestSummaryShareOfWinsCountedByHand: three windows on two series; the
// agent's per-day Sharpe ratio beats buy-and-hold's in cells (0, A),
// (1, A), (1, B) and (2, B), 4 of 6; it beats flat (Sharpe 0) where its
// own is positive; and per series on the whole record, each counted
// here from the returns.
func TestSummaryShareOfWinsCountedByHand(t *testing.T) {
	n := 20
	base := noise(7, n, 0, 0.01) // Sharpe(base + c) rises with c
	flat := make([]float64, n)
	level := func(c float64) []float64 { return add(base, c) }
	// agent's and buy-and-hold's mean in each cell: (window, series).
	cells := []struct {
		w      int
		s      string
		ag, bh float64
	}{
		{0, "A", 0.004, 0.001}, {0, "B", -0.004, 0.001},
		{1, "A", 0.002, -0.002}, {1, "B", 0.001, -0.003},
		{2, "A", -0.006, -0.001}, {2, "B", -0.001, -0.002},
	}
	var res []walkforward.Result
	for _, c := range cells {
		from := c.w * n
		res = append(res, row(c.w, c.s, walkforward.StrategyAgent, 1, true, from, level(c.ag)),
			row(c.w, c.s, walkforward.StrategyBuyAndHold, 0, true, from, level(c.bh)),
			row(c.w, c.s, walkforward.StrategyFlat, 0, true, from, flat))
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1, Weights: WeightsEqual})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	want := map[string][2]int{walkforward.StrategyBuyAndHold: {4, 6}, walkforward.StrategyFlat: {0, 6}}
	// Flat: the agent's cell Sharpe is positive where base + c has a
	// positive mean: count it independently.
	for _, c := range cells {
		if stats.Sharpe(level(c.ag)) > 0 {
			w := want[walkforward.StrategyFlat]
			w[0]++
			want[walkforward.StrategyFlat] = w
		}
	}
	if len(g.WinsCells) != 2 {
		t.Fatalf("wins over cells: %+v; want flat and buy-and-hold", g.WinsCells)
	}
	for _, w := range g.WinsCells {
		if got := [2]int{w.Wins, w.N}; got != want[w.Baseline] {
			t.Errorf("cells won against %s: %d of %d, want %d of %d", w.Baseline, w.Wins, w.N, want[w.Baseline][0], want[w.Baseline][1])
		}
	}
	// Series: each one's whole record, its three cells end to end.
	seriesWins := 0
	for _, sr := range []string{"A", "B"} {
		var ag, bh []float64
		for _, c := range cells {
			if c.s == sr {
				ag, bh = append(ag, level(c.ag)...), append(bh, level(c.bh)...)
			}
		}
		if stats.Sharpe(ag) > stats.Sharpe(bh) {
			seriesWins++
		}
	}
	found := false
	for _, w := range g.WinsSeries {
		if w.Baseline == walkforward.StrategyBuyAndHold {
			found = true
			if w.Wins != seriesWins || w.N != 2 {
				t.Errorf("series won against buy-and-hold: %d of %d, want %d of 2", w.Wins, w.N, seriesWins)
			}
		}
	}
	if !found {
		t.Errorf("no share of series won against buy-and-hold: %+v", g.WinsSeries)
	}
}

// TestSummaryDeflatedSharpeFallsWithTrials: the same record deflated
// for 1, 10 and 100 configurations tried: DSR with one trial is PSR(0),
// and it falls strictly as trials grow; the baselines have no DSR.
func TestSummaryDeflatedSharpeFallsWithTrials(t *testing.T) {
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, noise(8, 250, 0.001, 0.01)),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, noise(9, 250, 0, 0.01)),
	}
	prev := 2.0
	for _, n := range []int{1, 10, 100} {
		s, err := Summarize(res, SummaryOptions{Trials: n})
		if err != nil {
			t.Fatal(err)
		}
		g := group(t, s, GroupTraining)
		if g.Agent.DSR == nil || g.Agent.PSR == nil {
			t.Fatalf("trials %d: no DSR or PSR", n)
		}
		d := *g.Agent.DSR
		if n == 1 && d != *g.Agent.PSR {
			t.Errorf("one trial: DSR %v, want PSR(0) %v", d, *g.Agent.PSR)
		}
		if !(d < prev) {
			t.Errorf("trials %d: DSR %v, not below %v with fewer trials", n, d, prev)
		}
		prev = d
		if g.Baselines[0].DSR != nil || !strings.Contains(s.TrialVarRule, "1/n") {
			t.Errorf("baseline DSR %v, rule %q: want none and the 1/n rule", g.Baselines[0].DSR, s.TrialVarRule)
		}
	}
}

// TestSummaryCountsAbstainedRunsAndKeepsLeftOutSeriesApart: two seeds on
// A and B (trained) and C (left out); seed 2 abstains on B in window 1
// and on C in window 0. The left-out group holds C alone, its agent
// figures those of C's returns; abstentions are counted per group, per
// series and overall; fewer than 8 seeds is noted.
func TestSummaryCountsAbstainedRunsAndKeepsLeftOutSeriesApart(t *testing.T) {
	n := 15
	zero := make([]float64, n)
	var res []walkforward.Result
	cRets := map[uint64][]float64{}
	for w := range 2 {
		for _, sr := range []string{"A", "B", "C"} {
			in := sr != "C"
			res = append(res, row(w, sr, walkforward.StrategyBuyAndHold, 0, in, w*n, noise(uint64(100+w), n, 0, 0.01)))
			for _, seed := range []uint64{1, 2} {
				r := row(w, sr, walkforward.StrategyAgent, seed, in, w*n, noise(uint64(10*w)+seed, n, 0.001, 0.01))
				if seed == 2 && (w == 1 && sr == "B" || w == 0 && sr == "C") {
					r.Returns, r.Detail = zero, walkforward.DetailAbstained
				}
				if sr == "C" {
					cRets[seed] = append(cRets[seed], r.Returns...)
				}
				res = append(res, r)
			}
		}
	}
	s, err := Summarize(res, SummaryOptions{Trials: 3, Weights: WeightsEqual})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("summary with flat runs does not encode: %v", err)
	}
	if s.Counts.AgentRuns != 12 || s.Counts.Abstained != 2 || s.Counts.BaselineRuns != 6 || !slices.Equal(s.Counts.Seeds, []uint64{1, 2}) {
		t.Errorf("counts %+v: want 12 agent runs, 2 abstained, 6 baseline runs, seeds 1 and 2", s.Counts)
	}
	if !strings.Contains(strings.Join(s.Notes, "\n"), "2 seed(s)") {
		t.Errorf("notes %q: want one on the 2 seeds", s.Notes)
	}
	tr, lo := group(t, s, GroupTraining), group(t, s, GroupLeftOut)
	if !slices.Equal(tr.Series, []string{"A", "B"}) || !slices.Equal(lo.Series, []string{"C"}) {
		t.Errorf("groups' series %v and %v: want [A B] and [C]", tr.Series, lo.Series)
	}
	if tr.Counts.Abstained != 1 || lo.Counts.Abstained != 1 || tr.Agent.Abstained != 1 || tr.PerSeries[1].Abstained != 1 || tr.PerSeries[0].Abstained != 0 {
		t.Errorf("abstained: training %d (agent %d, per series %d, %d), left out %d; want 1 (1, 0, 1), 1",
			tr.Counts.Abstained, tr.Agent.Abstained, tr.PerSeries[0].Abstained, tr.PerSeries[1].Abstained, lo.Counts.Abstained)
	}
	mean := make([]float64, 2*n)
	for i := range mean {
		mean[i] = (cRets[1][i] + cRets[2][i]) / 2
	}
	if want := stats.Annualise(stats.Sharpe(mean), 252); !near(lo.Agent.Sharpe.Estimate, want, 1e-12) || lo.PerSeries[0].InTraining {
		t.Errorf("left-out agent Sharpe %v (in training %v), want %v, C's mean over seeds alone", lo.Agent.Sharpe.Estimate, lo.PerSeries[0].InTraining, want)
	}
	if len(tr.Seeds) != 2 || tr.Seeds[1].Seed != 2 || tr.Seeds[1].Abstained != 1 || tr.Seeds[1].Days != 2*n {
		t.Errorf("training seeds %+v: want seeds 1 and 2, seed 2 with 1 abstention on %d days", tr.Seeds, 2*n)
	}
	// Equal weights are linear: the mean-of-seeds portfolio is the mean
	// of the seeds' portfolios, so its total is not their mean but its
	// mean return is.
	if m := (tr.Seeds[0].AnnualReturn + tr.Seeds[1].AnnualReturn) / 2; !near(tr.Agent.AnnualReturn, m, 1e-12) {
		t.Errorf("mean-of-seeds annual return %v, want the seeds' mean %v", tr.Agent.AnnualReturn, m)
	}
	if tr.SeedMeanSharpe == nil || !near(tr.SeedMeanSharpe.Estimate, (tr.Seeds[0].Sharpe.Estimate+tr.Seeds[1].Sharpe.Estimate)/2, 1e-12) {
		t.Errorf("seed-mean Sharpe %+v, want the mean of %v and %v", tr.SeedMeanSharpe, tr.Seeds[0].Sharpe.Estimate, tr.Seeds[1].Sharpe.Estimate)
	}
}

// TestSummaryBaselineLikeTheAgentDiffersByNothing: a baseline with the
// agent's returns has a Sharpe difference of 0 with an interval holding
// 0, and does not lose; one with the agent's returns less 0.1 % a day has
// a lower Sharpe ratio on every resample, so the agent beats it.
func TestSummaryBaselineLikeTheAgentDiffersByNothing(t *testing.T) {
	a := noise(11, 120, 0.0005, 0.01)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, a),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, slices.Clone(a)),
		row(0, "A", walkforward.StrategyMomentum, 0, true, 0, add(a, -0.001)),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	for _, c := range g.VsBaselines {
		d := c.SharpeDiff
		switch c.Baseline {
		case walkforward.StrategyBuyAndHold:
			if d.Estimate != 0 || !(d.Lo <= 0 && 0 <= d.Hi) || c.Beats || d.Resamples == 0 {
				t.Errorf("against itself: %+v, beats %v; want 0 in [lo, hi], no win", d, c.Beats)
			}
		case walkforward.StrategyMomentum:
			if !(d.Lo > 0) || !c.Beats {
				t.Errorf("against itself less 0.1 %% a day: %+v, beats %v; want an interval above 0", d, c.Beats)
			}
		}
	}
	if len(g.VsBaselines) != 2 {
		t.Errorf("%d comparisons, want 2", len(g.VsBaselines))
	}
	if !strings.Contains(s.Headline(), "vs buy_and_hold +0.00") || !strings.Contains(s.Markdown(), "| tsmom |") {
		t.Errorf("headline or report misses the comparisons:\n%s\n%s", s.Headline(), s.Markdown())
	}
}

// TestSummaryOverlappingBlocksTakeTheLatestWindow: window 1's test block
// starts 10 days into window 0's 20; on the 10 shared days the portfolio
// takes window 1's returns.
func TestSummaryOverlappingBlocksTakeTheLatestWindow(t *testing.T) {
	w0, w1 := noise(12, 20, 0, 0.01), noise(13, 20, 0, 0.01)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, w0), row(1, "A", walkforward.StrategyAgent, 1, true, 10, w1),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, w0), row(1, "A", walkforward.StrategyBuyAndHold, 0, true, 10, w1),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1, Weights: WeightsEqual})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	want, _ := compounded(append(slices.Clone(w0[:10]), w1...))
	if g.Agent.Days != 30 || !near(g.Agent.TotalReturn, want, 1e-12) {
		t.Errorf("agent: %d days, total %v; want 30, %v", g.Agent.Days, g.Agent.TotalReturn, want)
	}
}

// TestSummaryPerYearSplitsTheCalendar: 40 days from 2015-12-12 fall 20
// in 2015 and 20 in 2016.
func TestSummaryPerYearSplitsTheCalendar(t *testing.T) {
	from := int(int32(time.Date(2015, 12, 12, 0, 0, 0, 0, time.UTC).Unix()/86400) - day0)
	a := noise(14, 40, 0.001, 0.01)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, from, a),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, from, noise(15, 40, 0, 0.01)),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1, Weights: WeightsEqual})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	if len(g.PerYear) != 2 || g.PerYear[0].Year != 2015 || g.PerYear[0].Agent.Days != 20 || g.PerYear[1].Agent.Days != 20 ||
		!near(g.PerYear[1].Agent.Sharpe.Estimate, stats.Annualise(stats.Sharpe(a[20:]), 252), 1e-12) {
		t.Errorf("per year %+v: want 2015 and 2016, 20 days each, 2016's Sharpe that of its days", g.PerYear)
	}
}

func TestSummarizeRejectsBadInput(t *testing.T) {
	ok := row(0, "A", walkforward.StrategyAgent, 1, true, 0, noise(16, 20, 0, 0.01))
	short := ok
	short.Returns = short.Returns[:5]
	cases := []struct {
		name  string
		res   []walkforward.Result
		opt   SummaryOptions
		parts []string
	}{
		{"trials", []walkforward.Result{ok}, SummaryOptions{}, []string{"trials 0"}},
		{"weights", []walkforward.Result{ok}, SummaryOptions{Trials: 1, Weights: "risk"}, []string{`weights "risk"`}},
		{"lengths", []walkforward.Result{ok, short}, SummaryOptions{Trials: 1}, []string{"result 1", "window 0, A, agent seed 1", "20 days and 5 returns"}},
		{"twice", []walkforward.Result{ok, ok}, SummaryOptions{Trials: 1, Weights: WeightsEqual}, []string{"two results for window 0 on A"}},
		{"no buy-and-hold", []walkforward.Result{ok}, SummaryOptions{Trials: 1}, []string{"A has no buy_and_hold results", "weights equal"}},
		{"none", nil, SummaryOptions{Trials: 1}, []string{"no results"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Summarize(c.res, c.opt)
			if err == nil {
				t.Fatalf("no error, want one saying %q", c.parts)
			}
			for _, p := range c.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not say %q", err, p)
				}
			}
		})
	}
}

// TestSummaryShorterThanTheWarmupHasEqualWeights: 15 days are fewer than
// the 20-day volatility warm-up and stats.MinBars after it, so the group
// falls back to equal weights (and says so) rather than having no
// portfolio.
func TestSummaryShorterThanTheWarmupHasEqualWeights(t *testing.T) {
	a, b := noise(17, 15, 0.001, 0.01), noise(18, 15, 0, 0.01)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, a), row(0, "B", walkforward.StrategyAgent, 1, true, 0, b),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, b), row(0, "B", walkforward.StrategyBuyAndHold, 0, true, 0, a),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	if g.Weights != WeightsEqual || g.Agent.Days != 15 || g.WarmupCells != 0 || !strings.Contains(strings.Join(s.Notes, "\n"), "equal weights instead") {
		t.Errorf("weights %q, %d days, warm-up %d, notes %q; want equal weights on 15 days and a note", g.Weights, g.Agent.Days, g.WarmupCells, s.Notes)
	}
	s2, err := Summarize(res, SummaryOptions{Trials: 1, VolDays: 5, VolMinDays: 3})
	if err != nil {
		t.Fatal(err)
	}
	if g2 := group(t, s2, GroupTraining); g2.Weights != WeightsInverseVol || g2.Agent.Days != 12 {
		t.Errorf("a 3-day warm-up: weights %q on %d days, want inverse_vol on 12", g2.Weights, g2.Agent.Days)
	}
}
