package sim_test

import (
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// TestPooledWindowsCompoundTheirReturns: pooling one window gives that
// window's metrics, and pooling consecutive windows compounds their total
// returns, (1 + R₁)(1 + R₂) − 1, for the agent and for buy-and-hold.
func TestPooledWindowsCompoundTheirReturns(t *testing.T) {
	ds := walkDataset(11, 900)
	var reps []sim.Report
	for _, r := range []market.Range{{From: 0, To: 300}, {From: 300, To: 600}, {From: 600, To: 900}} {
		rep, err := sim.Backtest(ds, r, churn)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	}
	one, err := sim.Pool(reps[:1])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"total return", one.TotalReturn, reps[0].TotalReturn}, {"Sharpe", one.Sharpe, reps[0].Sharpe},
		{"max drawdown", one.MaxDrawdown, reps[0].MaxDrawdown}, {"turnover", one.Turnover, reps[0].Turnover},
		{"costs", one.Costs, reps[0].Costs}, {"buy-and-hold total return", one.BuyAndHold.TotalReturn, reps[0].BuyAndHold.TotalReturn},
	} {
		if math.Abs(c.got-c.want) > 1e-12*max(1, math.Abs(c.want)) {
			t.Errorf("one window pooled: %s %g, want %g", c.name, c.got, c.want)
		}
	}
	all, err := sim.Pool(reps)
	if err != nil {
		t.Fatal(err)
	}
	wantAgent, wantBH := 1.0, 1.0
	for _, r := range reps {
		wantAgent *= 1 + r.TotalReturn
		wantBH *= 1 + r.BuyAndHold.TotalReturn
	}
	if math.Abs(all.TotalReturn-(wantAgent-1)) > 1e-9 || math.Abs(all.BuyAndHold.TotalReturn-(wantBH-1)) > 1e-9 {
		t.Errorf("pooled total returns %g and %g, want %g and %g", all.TotalReturn, all.BuyAndHold.TotalReturn, wantAgent-1, wantBH-1)
	}
	if all.Bars != 1+299*3 || all.Trades != reps[0].Trades+reps[1].Trades+reps[2].Trades {
		t.Errorf("pooled %d bars and %d trades", all.Bars, all.Trades)
	}
	wins := 0
	for _, r := range reps {
		if r.BuyAndHold.TotalReturn > 0 {
			wins++
		}
	}
	if all.BuyAndHold.Trades != 3 || all.BuyAndHold.WinRate != float64(wins)/3 {
		t.Errorf("pooled buy-and-hold: %d trades, win rate %g; want one per window and %d/3 winning", all.BuyAndHold.Trades, all.BuyAndHold.WinRate, wins)
	}
	if _, err := sim.Pool(nil); err == nil {
		t.Error("pooling nothing did not fail")
	}
}
