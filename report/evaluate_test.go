package report

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/market/sim"
)

// TestDrawdownPeaksAtTheMaxDrawdown: the drawdown curve is never negative
// and its maximum is sim.MaxDrawdown of the same equity.
func TestDrawdownPeaksAtTheMaxDrawdown(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := make([]float64, 500)
	e[0] = 100
	for i := 1; i < len(e); i++ {
		e[i] = e[i-1] * (1 + 0.02*rng.NormFloat64())
	}
	dd := Drawdown(e)
	top := 0.0
	for _, v := range dd {
		if v < 0 {
			t.Fatalf("negative drawdown %g", v)
		}
		top = max(top, v)
	}
	if want := sim.MaxDrawdown(e); math.Abs(top-want) > 1e-15 {
		t.Errorf("max of the drawdown curve %g, want sim.MaxDrawdown %g", top, want)
	}
}

// TestPlotsAreWritten: WritePlots writes both PNGs of a report.
func TestPlotsAreWritten(t *testing.T) {
	r := sim.Report{Equity: []float64{100, 101, 99, 103}, BuyAndHoldEquity: []float64{100, 98, 97, 104}}
	dir := t.TempDir()
	eq, dd, err := WritePlots(dir, "x", "test", r)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{eq, dd} {
		if m, _ := filepath.Glob(filepath.Join(dir, f)); len(m) != 1 {
			t.Errorf("%s not written", f)
		}
	}
}

// TestSeedSummaryCountsAndSpread: Summarize counts the abstentions and the
// checkpoints above zero and above buy-and-hold's Sharpe, and gives their
// mean and sample standard deviation (hand-worked: Sharpes −1, 0.5, 2.5
// against buy-and-hold 0.4: mean 2/3, sd √(37/12)).
func TestSeedSummaryCountsAndSpread(t *testing.T) {
	row := func(sharpe float64, abstained bool) SeedRow {
		var r SeedRow
		r.Abstained = abstained
		r.Checkpoint.Sharpe, r.Checkpoint.BuyAndHold.Sharpe = sharpe, 0.4
		return r
	}
	s := Summarize([]SeedRow{row(-1, true), row(0.5, true), row(2.5, false)})
	if s.Runs != 3 || s.Abstained != 2 || s.AboveZero != 2 || s.AboveBuyHold != 2 {
		t.Errorf("counts %+v, want 3 runs, 2 abstained, 2 above zero, 2 above buy-and-hold", s)
	}
	if math.Abs(s.Mean-2.0/3) > 1e-15 || math.Abs(s.SD-math.Sqrt(37.0/12)) > 1e-15 {
		t.Errorf("mean %v, sd %v; want %v, %v", s.Mean, s.SD, 2.0/3, math.Sqrt(37.0/12))
	}
	if one := Summarize([]SeedRow{row(1, false)}); one.SD != 0 || one.Mean != 1 {
		t.Errorf("one run: %+v, want mean 1 and sd 0", one)
	}
}
