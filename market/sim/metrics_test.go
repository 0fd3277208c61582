package sim_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/market/sim"
)

// TestMetricsOfHandCurve checks every return metric on E = 100, 110, 99,
// 108.9 with 4 bars per year (hand calculation in the comments).
func TestMetricsOfHandCurve(t *testing.T) {
	eq := []float64{100, 110, 99, 108.9}
	// r = +0.1, −0.1, +0.1; mean 1/30; deviations 1/15, −2/15, 1/15, sum of
	// squares 6/225, sample variance 3/225 = 1/75, std = 0.11547005.
	m := sim.Measure(eq, []int{0, 1, 1, 1}, nil, 0, 4)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"total return", m.TotalReturn, 0.089},                // 108.9/100 − 1
		{"annual return", m.AnnualReturn, 0.1203933084652833}, // 1.089^(4/3) − 1
		{"volatility", m.Volatility, 0.23094010767585},        // 0.11547005·√4
		{"sharpe", m.Sharpe, 0.5773502691896258},              // (1/30)/0.11547005·2 = 1/√3
		// DD = √(0.01/3) = 0.05773503; (1/30)/0.05773503·2 = 2/√3.
		{"sortino", m.Sortino, 1.1547005383792515},
		{"max drawdown", m.MaxDrawdown, 0.1},    // 1 − 99/110
		{"calmar", m.Calmar, 1.203933084652833}, // 0.12039331/0.1
		{"cvar 5%", m.CVaR5, 0.1},               // ⌈0.05·3⌉ = 1 worst return: −0.1
		{"exposure", m.Exposure, 0.75},          // 3 of 4 bars
		{"final equity", m.FinalEquity, 108.9},
		{"bars", float64(m.Bars), 4},
		{"turnover without trades", m.Turnover, 0},
		{"win rate without trades", m.WinRate, 0},
		{"profit factor without trades", m.ProfitFactor, 0},
	} {
		if !near(c.got, c.want, 1e-12) {
			t.Errorf("%s = %.17g, want %.17g", c.name, c.got, c.want)
		}
	}
}

// TestDegenerateCurvesGiveZerosNotNaN: flat, empty, one-value, rising and
// ruined curves give finite metrics with the documented conventions.
func TestDegenerateCurvesGiveZerosNotNaN(t *testing.T) {
	for _, c := range []struct {
		name string
		eq   []float64
		want sim.Metrics
	}{
		{"flat", []float64{100, 100, 100}, sim.Metrics{Bars: 3, FinalEquity: 100}},
		{"empty", nil, sim.Metrics{}},
		{"one value", []float64{100}, sim.Metrics{Bars: 1, FinalEquity: 100}},
		// r = 0.1, 0.2: mean 0.15, sample std √0.005 = 0.07071068, Sharpe
		// 0.15/0.07071068 = 2.1213203; no downside (Sortino 0), no drawdown
		// (Calmar 0); annual 1.32^(1/2) − 1; CVaR: worst 1 is +0.1, a gain: −0.1.
		{"rising", []float64{100, 110, 132}, sim.Metrics{Bars: 3, FinalEquity: 132, TotalReturn: 0.32,
			AnnualReturn: math.Sqrt(1.32) - 1, Volatility: math.Sqrt(0.005), Sharpe: 0.15 / math.Sqrt(0.005), CVaR5: -0.1}},
		// E goes below zero: r = −1.5, then 0 (no return after ruin); total
		// −0.9, annual 0.1^(1/2) − 1; drawdown 1 − (−50/100) = 1.5.
		{"ruined", []float64{100, -50, 10}, sim.Metrics{Bars: 3, FinalEquity: 10, TotalReturn: -0.9,
			AnnualReturn: math.Sqrt(0.1) - 1, MaxDrawdown: 1.5, Calmar: (math.Sqrt(0.1) - 1) / 1.5, CVaR5: 1.5,
			Volatility: 1.0606601717798212, Sharpe: -0.7071067811865476, Sortino: -0.7071067811865476}},
	} {
		m := sim.Measure(c.eq, nil, nil, 0, 1)
		got, want := metricValues(m), metricValues(c.want)
		for k := range got {
			if !near(got[k], want[k], 1e-9) {
				t.Errorf("%s: metric %d = %.17g, want %.17g (all %+v)", c.name, k, got[k], want[k], m)
			}
		}
	}
}

// metricValues lists the float metrics (and the counts) in struct order.
func metricValues(m sim.Metrics) []float64 {
	return []float64{m.TotalReturn, m.AnnualReturn, m.Volatility, m.Sharpe, m.Sortino, m.MaxDrawdown, m.Calmar,
		m.CVaR5, float64(m.Trades), m.WinRate, m.ProfitFactor, m.Turnover, m.Exposure, float64(m.Bars), m.FinalEquity}
}

// TestCVaRTakesTheCeilingOfFivePercent: k = ⌈5%·n⌉ worst returns, computed
// without float error (5%·20 is exactly 1).
func TestCVaRTakesTheCeilingOfFivePercent(t *testing.T) {
	for _, c := range []struct {
		n    int
		want float64
	}{
		{20, 0.20}, // worst 1 of −0.01·(1…20): 0.20
		{21, 0.205},
		{40, 0.395}, // worst 2: (0.40 + 0.39)/2
		{41, (0.41 + 0.40 + 0.39) / 3},
	} {
		r := make([]float64, c.n)
		for i := range r {
			r[i] = -0.01 * float64(i+1)
		}
		if got := sim.CVaR(r, 0.05); !near(got, c.want, 1e-12) {
			t.Errorf("n = %d: CVaR %v, want %v", c.n, got, c.want)
		}
	}
}

// TestTradeStatistics: win rate counts PnL > 0 only; profit factor is gross
// profit over gross loss, 0 without a losing trade.
func TestTradeStatistics(t *testing.T) {
	tr := func(pnl ...float64) []sim.Trade {
		var ts []sim.Trade
		for _, p := range pnl {
			ts = append(ts, sim.Trade{PnL: p})
		}
		return ts
	}
	for _, c := range []struct {
		pnl     []float64
		win, pf float64
	}{
		{[]float64{10, -5, 20, -15, 0}, 0.4, 1.5}, // wins 10, 20 of 5; 30/20
		{[]float64{5, 5}, 1, 0},                   // no loss: 0 by convention
		{[]float64{-3}, 0, 0},                     // 0/3
		{nil, 0, 0},
	} {
		ts := tr(c.pnl...)
		if w, pf := sim.WinRate(ts), sim.ProfitFactor(ts); w != c.win || pf != c.pf {
			t.Errorf("PnL %v: win rate %v profit factor %v, want %v %v", c.pnl, w, pf, c.win, c.pf)
		}
	}
}

// TestTurnoverAndExposure: 200000 traded on a constant 100000 over 2 bars
// at 2 bars per year (1 year) is 2 per year; exposure counts non-zero
// positions of either sign.
func TestTurnoverAndExposure(t *testing.T) {
	if got := sim.Turnover(200000, []float64{100000, 100000, 100000}, 2); got != 2 {
		t.Errorf("turnover %v, want 2", got)
	}
	if got := sim.Turnover(200000, []float64{100000, 100000, 100000}, 1); got != 1 {
		t.Errorf("turnover over 2 years %v, want 1", got)
	}
	if got := sim.Exposure([]int{0, 1, -2, 0}); got != 0.5 {
		t.Errorf("exposure %v, want 0.5", got)
	}
}

// TestOverflowStillMarshals: a return too large to annualise becomes
// math.MaxFloat64 rather than +Inf, so the JSON encodes.
func TestOverflowStillMarshals(t *testing.T) {
	m := sim.Measure([]float64{1, 1e300}, []int{0, 1}, []sim.Trade{{PnL: 1}}, 1, 8760)
	if m.AnnualReturn != math.MaxFloat64 {
		t.Errorf("annual return %v, want MaxFloat64", m.AnnualReturn)
	}
	if _, err := json.Marshal(sim.Report{Metrics: m, BuyAndHold: m}); err != nil {
		t.Fatal(err)
	}
}

// TestCVaRIsTheMeanOfTheSortedWorst: CVaR selects the worst returns
// instead of sorting them all; on random returns with ties, zeros of both
// signs and NaNs it equals, bit for bit, the mean of the first k of the
// whole sorted slice, and leaves its input as it was.
func TestCVaRIsTheMeanOfTheSortedWorst(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := range 2000 {
		n := 1 + rng.IntN(300)
		r := make([]float64, n)
		for i := range r {
			switch rng.IntN(10) {
			case 0:
				r[i] = 0
			case 1:
				r[i] = math.Copysign(0, -1)
			case 2:
				r[i] = float64(rng.IntN(3)) / 100 // ties
			default:
				r[i] = rng.NormFloat64() / 100
			}
		}
		if trial%50 == 0 {
			r[rng.IntN(n)] = math.NaN()
		}
		alpha := []float64{0.01, 0.05, 0.2, 0.5, 1}[trial%5]
		in := slices.Clone(r)
		sorted := slices.Clone(r)
		slices.Sort(sorted)
		k := max(1, (n*int(math.Round(alpha*10000))+9999)/10000)
		var sum float64
		for _, x := range sorted[:k] {
			sum += x
		}
		want := 0 - sum/float64(k)
		got := sim.CVaR(r, alpha)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("trial %d, n %d, alpha %g: CVaR %v, want %v", trial, n, alpha, got, want)
		}
		if !slices.EqualFunc(in, r, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			t.Fatalf("trial %d: CVaR changed its input", trial)
		}
	}
}

func BenchmarkCVaR(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := make([]float64, 8000)
	for i := range r {
		r[i] = rng.NormFloat64() / 100
	}
	for b.Loop() {
		sim.CVaR(r, 0.05)
	}
}
