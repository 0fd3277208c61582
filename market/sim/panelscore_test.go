package sim_test

import (
	"math"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// TestPanelValidationIsTheEqualRiskPortfolio: two series on the same days,
// one that gains 1 % a day and one that loses 0.5 % and gains 1.5 % in
// turn, give the portfolio's daily returns by hand; its Sharpe ratio is
// theirs annualised with the days a year of the bars.
func TestPanelValidationIsTheEqualRiskPortfolio(t *testing.T) {
	const n = 6
	mk := func(name string) *market.Dataset {
		b := &prices.Bars{Name: name, Time: make([]time.Time, n), Close: make([]float64, n)}
		for i := range n {
			b.Time[i] = time.Date(2020, 1, 1+i, 12, 0, 0, 0, time.UTC)
		}
		return &market.Dataset{Bars: b, Valid: market.Range{From: 0, To: n}, BarsPerYear: 365}
	}
	a, b := mk("a"), mk("b")
	equity := map[*market.Dataset][]float64{a: {100}, b: {100}}
	for i := 1; i < n; i++ {
		equity[a] = append(equity[a], equity[a][i-1]*1.01)
		r := 1.015
		if i%2 == 1 {
			r = 0.995
		}
		equity[b] = append(equity[b], equity[b][i-1]*r)
	}
	sc, err := sim.PanelValidation(func(d *market.Dataset, r market.Range) (sim.Report, error) {
		return sim.Report{Equity: equity[d]}, nil
	}, []string{"a", "b"}, []*market.Dataset{a, b})
	if err != nil {
		t.Fatal(err)
	}
	// Day 0 returns 0 in both; days 1..5: (1 % + (−0.5 % or 1.5 %))/2.
	port := []float64{0, 0.0025, 0.0125, 0.0025, 0.0125, 0.0025}
	var m, v float64
	for _, x := range port {
		m += x / n
	}
	for _, x := range port {
		v += (x - m) * (x - m) / (n - 1)
	}
	want := m / math.Sqrt(v) * math.Sqrt(365)
	if math.Abs(sc.Sharpe-want) > 1e-6*want {
		t.Fatalf("portfolio Sharpe %g, by hand %g", sc.Sharpe, want)
	}
	// As one report: the same Sharpe, its t-statistic SR·√n of the daily
	// returns, the portfolio's compounded return, flat's nothing.
	rep := sc.Report()
	total := 1.0
	for _, x := range port {
		total *= 1 + x
	}
	wantT := m / math.Sqrt(v) * math.Sqrt(n)
	if rep.Sharpe != sc.Sharpe || math.Abs(rep.SharpeT()-wantT) > 1e-9*wantT || math.Abs(sc.T-wantT) > 1e-9*wantT ||
		math.Abs(rep.TotalReturn-(total-1)) > 1e-12 || rep.Flat.TotalReturn != 0 || rep.BuyAndHold.TotalReturn != 0 {
		t.Errorf("report Sharpe %g t %g (score t %g) return %g flat %g buy and hold %g; want %g, t %g, return %g, 0, 0 (no buy-and-hold curve)",
			rep.Sharpe, rep.SharpeT(), sc.T, rep.TotalReturn, rep.Flat.TotalReturn, rep.BuyAndHold.TotalReturn, sc.Sharpe, wantT, total-1)
	}
}
