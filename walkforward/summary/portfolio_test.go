package summary

import (
	"testing"

	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
)

// TestGroupPortfoliosAreWhatTheMeasuresMeasure: with equal weights the
// agent's portfolio is (a + b)/2 day by day (its mean over two seeds on
// one series and one seed on the other: the seed mean first), each
// baseline's likewise; every portfolio's days, Sharpe ratio and
// compounded equity are its Measure's, and the copy returned is the
// caller's to change.
func TestGroupPortfoliosAreWhatTheMeasuresMeasure(t *testing.T) {
	a1, a2, b := noise(1, 30, 0.001, 0.01), noise(2, 30, 0.002, 0.01), noise(3, 30, 0.0005, 0.02)
	ha, hb := noise(4, 30, 0, 0.01), noise(5, 30, 0, 0.01)
	res := []walkforward.Result{
		row(0, "A", walkforward.StrategyAgent, 1, true, 0, a1),
		row(0, "A", walkforward.StrategyAgent, 2, true, 0, a2),
		row(0, "B", walkforward.StrategyAgent, 1, true, 0, b),
		row(0, "B", walkforward.StrategyAgent, 2, true, 0, b),
		row(0, "A", walkforward.StrategyBuyAndHold, 0, true, 0, ha),
		row(0, "B", walkforward.StrategyBuyAndHold, 0, true, 0, hb),
	}
	s, err := Summarize(res, SummaryOptions{Trials: 1, Weights: WeightsEqual})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, GroupTraining)
	ps := g.Portfolios()
	if len(ps) != 2 || ps[0].Strategy != walkforward.StrategyAgent || ps[1].Strategy != walkforward.StrategyBuyAndHold {
		t.Fatalf("portfolios %+v: want the agent's, then buy-and-hold's", ps)
	}
	for i, want := range [][]float64{make([]float64, 30), make([]float64, 30)} {
		for d := range want {
			if i == 0 {
				want[d] = ((a1[d]+a2[d])/2 + b[d]) / 2
			} else {
				want[d] = (ha[d] + hb[d]) / 2
			}
		}
		p := ps[i]
		if len(p.Days) != 30 || p.Days[0] != day0 || p.Days[29] != day0+29 {
			t.Fatalf("%s: days %v, want 30 from %d", p.Strategy, p.Days, day0)
		}
		for d := range want {
			if !near(p.Returns[d], want[d], 1e-15) {
				t.Fatalf("%s day %d: return %v, want %v", p.Strategy, d, p.Returns[d], want[d])
			}
		}
		m := g.Agent
		if i == 1 {
			m = g.Baselines[0]
		}
		total, _ := compounded(want)
		eq := p.Equity()
		if m.Days != len(p.Returns) || !near(m.Sharpe.Estimate, stats.Annualise(stats.Sharpe(p.Returns), 252), 1e-12) ||
			!near(eq[len(eq)-1]-1, total, 1e-12) || !near(m.TotalReturn, total, 1e-12) {
			t.Errorf("%s: measure %d days, Sharpe %v, total %v; portfolio %d days, equity ends %v; want total %v",
				p.Strategy, m.Days, m.Sharpe.Estimate, m.TotalReturn, len(p.Returns), eq[len(eq)-1], total)
		}
	}
	ps[0].Returns[0] = 99
	if g.Portfolios()[0].Returns[0] == 99 {
		t.Error("Portfolios returns the group's own slices: a caller's change shows in the next call")
	}
}
