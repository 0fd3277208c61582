package sim_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// churn reverses between long and short at full size every bar.
var churn = policyFunc(func(t int, _ []float32) market.Action {
	if t%2 == 0 {
		return market.Action{Dir: 2, Size: market.NumSizes - 1}
	}
	return market.Action{Dir: 0, Size: market.NumSizes - 1}
})

// cheapSeries is n bars of a random walk around price level p with small
// moves, so that a churning policy loses through its costs.
func cheapSeries(seed uint64, n int, p float64, in market.Instrument) *market.Dataset {
	rng := rand.New(rand.NewPCG(seed, 3))
	bars := make([]ohlc, n)
	c := p
	for i := range bars {
		o := c * (1 + 1e-4*rng.NormFloat64())
		c = o * (1 + 2e-3*rng.NormFloat64())
		bars[i] = ohlc{o, max(o, c) * 1.001, min(o, c) * 0.999, c}
	}
	ds := handDataset(bars, 0.002*p, in)
	ds.BarsPerYear = 6000
	return ds
}

// checkFinite fails when any float of m is NaN, ±Inf or ±MaxFloat64 (the
// stand-in for an overflow).
func checkFinite(t *testing.T, what string, m sim.Metrics) {
	t.Helper()
	v := reflect.ValueOf(m)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Float64 {
			continue
		}
		if x := f.Float(); math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) == math.MaxFloat64 {
			t.Errorf("%s.%s = %g, want a finite value", what, v.Type().Field(i).Name, x)
		}
	}
}

// TestRuinEndsTradingAtTheFloorRegression is the −7,591 % case of issue 9:
// an S&P-sized tick (0.25) on a series priced around 60, with the point
// value resolved for that series (capital / (4 contracts · 60)), and a
// policy that reverses every bar. Each reversal costs 8 contracts ×
// 0.25 × 416.7 ≈ 833, 0.8 % of the capital, so the account is gone within
// a few hundred bars. The old backtest traded on below zero and reported
// a total return of −7,591 %, a drawdown of 7,591 % and turnover 0. Now
// trading ends at the bar where equity reaches zero: the report names it,
// the total return is −100 % at worst, the drawdown 100 % at most, and
// the turnover counts what was traded.
func TestRuinEndsTradingAtTheFloorRegression(t *testing.T) {
	in := market.Instrument{TickSize: 0.25, SlippageTicks: 1, Commission: 0.62,
		PointValue: 100000.0 / (4 * 60), MaxContracts: 4, InitialCapital: 100000}
	ds := cheapSeries(9, 10612, 60, in)
	r := market.Range{From: 0, To: ds.Bars.Len()}
	rep, err := sim.Backtest(ds, r, churn)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RuinBar <= r.From || rep.RuinBar >= r.To || rep.RuinTime == nil || !rep.RuinTime.Equal(ds.Bars.Time[rep.RuinBar]) {
		t.Fatalf("ruin bar %d at %v: want a bar inside %s and its time", rep.RuinBar, rep.RuinTime, r)
	}
	if rep.TotalReturn < -1 || rep.TotalReturn > -0.99 || rep.MaxDrawdown > 1 || rep.MaxDrawdown < 0.99 {
		t.Errorf("total return %g, max drawdown %g: want about −100 %% and 100 %%, never beyond", rep.TotalReturn, rep.MaxDrawdown)
	}
	if rep.AnnualReturn < -1 || rep.Turnover <= 0 || rep.Costs <= 0 || rep.CostPerTrade <= 0 {
		t.Errorf("annual return %g, turnover %g, costs %g, cost per trade %g: want ≥ −1 and positive", rep.AnnualReturn, rep.Turnover, rep.Costs, rep.CostPerTrade)
	}
	ruin := rep.RuinBar - r.From
	for i := ruin; i < len(rep.Equity); i++ {
		if rep.Equity[i] != rep.Equity[ruin] || rep.Equity[i] < 0 || rep.Positions[i] != 0 {
			t.Fatalf("bar %d after the ruin at %d: equity %g (ruin %g), position %d; want flat and unchanged, never below 0",
				i+r.From, rep.RuinBar, rep.Equity[i], rep.Equity[ruin], rep.Positions[i])
		}
	}
	for _, tr := range rep.TradeLog {
		if tr.ExitBar > rep.RuinBar {
			t.Errorf("trade %+v exits after the ruin bar %d", tr, rep.RuinBar)
		}
	}
	checkFinite(t, "agent", rep.Metrics)
	checkFinite(t, "buy_and_hold", rep.BuyAndHold)
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("report does not encode: %v", err)
	}
	// The same costs priced in basis points of the price would not ruin
	// the same account: 2·(1 + 0.5) bps a round trip.
	bps := in
	bps.TickSize, bps.SlippageTicks, bps.Commission, bps.SlippageBps, bps.CommissionBps = 0.006, 0, 0, 1, 0.5
	ds.Instrument = bps
	rb, err := sim.Backtest(ds, r, churn)
	if err != nil {
		t.Fatal(err)
	}
	if got := rb.CostPerRoundTripBps; math.Abs(got-3) > 1e-9 {
		t.Errorf("bps instrument: cost per round trip %g bps, want 3", got)
	}
	if got := rep.CostPerRoundTripBps; got < 80 {
		t.Errorf("tick instrument at price 60: cost per round trip %g bps, want about 2·(0.25 + 0.62/416.7)/60 ≈ 84", got)
	}
}

// TestRuinAtAMarginFloorKeepsTheEquityLeft: with margin_floor 0.9 the
// account stops at the first close at or below 90 % of the capital and
// keeps what it had (no shortfall).
func TestRuinAtAMarginFloorKeepsTheEquityLeft(t *testing.T) {
	in := market.Instrument{TickSize: 0.25, SlippageTicks: 1, Commission: 0.62,
		PointValue: 100000.0 / (4 * 60), MaxContracts: 4, InitialCapital: 100000, MarginFloor: 0.9}
	ds := cheapSeries(4, 3000, 60, in)
	rep, err := sim.Backtest(ds, market.Range{From: 0, To: 3000}, churn)
	if err != nil {
		t.Fatal(err)
	}
	i := rep.RuinBar
	if i == 0 || rep.Equity[i] > 90000 || rep.Equity[i-1] <= 90000 || rep.RuinShortfall != 0 {
		t.Fatalf("ruin bar %d, equity %g after %g, shortfall %g: want the first close at or below 90000", i, rep.Equity[i], rep.Equity[i-1], rep.RuinShortfall)
	}
	if rep.FinalEquity != rep.Equity[i] || rep.Equity[i] < 85000 {
		t.Errorf("final equity %g, equity at the ruin %g: want them equal and near the floor", rep.FinalEquity, rep.Equity[i])
	}
}

// TestRuinBelowZeroRecordsTheDebt: a gap that takes equity below zero
// ends trading at that bar with equity 0 and the debt as shortfall.
// Long 2 contracts at PV 100 on capital 1000: buy at 101 (+1 slippage,
// 2 commission each), then the price gaps to 90 and closes at 94.
// E after bar 1 = 1000 − 2·(1·100 + 2) + 2·(102 − 101)·100 = 996; bar 2:
// 2·(90 − 102)·100 + 2·(94 − 90)·100 = −1600 → −604, and the close-out
// at 94 − 1 costs 2·(100 + 2) = 204: −808, recorded as 0 with a
// shortfall of 808.
func TestRuinBelowZeroRecordsTheDebt(t *testing.T) {
	in := market.Instrument{TickSize: 1, SlippageTicks: 1, Commission: 2, PointValue: 100, MaxContracts: 2, InitialCapital: 1000}
	ds := handDataset([]ohlc{{100, 100, 100, 100}, {101, 103, 100, 102}, {90, 95, 89, 94}, {94, 96, 93, 95}, {95, 96, 94, 95}}, 5, in)
	long := market.Action{Dir: 2, Size: 3}
	rep, err := sim.Backtest(ds, market.Range{From: 0, To: 5}, &script{acts: map[int]market.Action{0: long, 1: long, 2: long, 3: long}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RuinBar != 2 || rep.RuinShortfall != 808 || rep.FinalEquity != 0 || rep.TotalReturn != -1 || rep.MaxDrawdown != 1 {
		t.Errorf("ruin bar %d, shortfall %g, final equity %g, total return %g, max drawdown %g; want 2, 808, 0, −1, 1",
			rep.RuinBar, rep.RuinShortfall, rep.FinalEquity, rep.TotalReturn, rep.MaxDrawdown)
	}
	if want := []float64{1000, 996, 0, 0, 0}; !reflect.DeepEqual(rep.Equity, want) {
		t.Errorf("equity %v, want %v", rep.Equity, want)
	}
	checkFinite(t, "agent", rep.Metrics)
}

// TestCostsAreWhatTheFillsPaid: the reported costs equal the slippage and
// commission of every fill, and cost per trade divides them by the trades
// (hand series of TestBacktestIsHandComputed: 8 fills of a contract at
// 1·10 + 2 = 12 each).
func TestCostsAreWhatTheFillsPaid(t *testing.T) {
	ds := btDataset()
	p := &script{acts: map[int]market.Action{0: {Dir: 2, Size: 3}, 1: {Dir: 2, Size: 3}, 2: {Dir: 0, Size: 3}, 3: flat}}
	rep, err := sim.Backtest(ds, market.Range{From: 0, To: 5}, p)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Costs != 96 || rep.CostPerTrade != 48 {
		t.Errorf("costs %g, cost per trade %g; want 96 and 48", rep.Costs, rep.CostPerTrade)
	}
	if rep.BuyAndHold.Costs != 48 || rep.Flat.Costs != 0 {
		t.Errorf("benchmark costs %g and %g; want 48 and 0", rep.BuyAndHold.Costs, rep.Flat.Costs)
	}
	// Round trip at the mean close 101.4: 2·(1 + 2/10)/101.4 · 10⁴ bps.
	if want := 2 * 1.2 / 101.4 * 1e4; math.Abs(rep.CostPerRoundTripBps-want) > 1e-9 {
		t.Errorf("cost per round trip %g bps, want %g", rep.CostPerRoundTripBps, want)
	}
}
