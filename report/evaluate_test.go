package report

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/market"
)

// TestDrawdownPeaksAtTheMaxDrawdown: the drawdown curve is never negative
// and its maximum is market.MaxDrawdown of the same equity.
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
	if want := market.MaxDrawdown(e); math.Abs(top-want) > 1e-15 {
		t.Errorf("max of the drawdown curve %g, want market.MaxDrawdown %g", top, want)
	}
}

// TestPlotsAreWritten: WritePlots writes both PNGs of a report.
func TestPlotsAreWritten(t *testing.T) {
	r := market.Report{Equity: []float64{100, 101, 99, 103}, BuyAndHoldEquity: []float64{100, 98, 97, 104}}
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
