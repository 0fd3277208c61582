package sim_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// The synthetic series' oracle is a Policy the backtest can run.
var _ sim.Policy = (*market.Oracle)(nil)

// script plays fixed actions per bar and records the position feature of
// each observation it is shown.
type script struct {
	acts map[int]market.Action
	seen map[int]float32
}

func (s *script) Act(t int, obs []float32) market.Action {
	if s.seen == nil {
		s.seen = map[int]float32{}
	}
	s.seen[t] = obs[market.NumFeatures]
	if a, ok := s.acts[t]; ok {
		return a
	}
	return flat
}

// policyFunc adapts a function to market.Policy.
type policyFunc func(t int, obs []float32) market.Action

func (f policyFunc) Act(t int, obs []float32) market.Action { return f(t, obs) }

// btDataset is the 5-bar hand series of the backtest tests: s = 1 tick of
// 1, commission 2, PV 10, max 2 contracts, capital 10000, 4 bars a year.
func btDataset() *market.Dataset {
	in := market.Instrument{TickSize: 1, SlippageTicks: 1, Commission: 2, PointValue: 10, MaxContracts: 2, InitialCapital: 10000}
	return handDataset([]ohlc{{100, 100, 100, 100}, {101, 103, 100, 102}, {104, 106, 103, 105}, {103, 104, 100, 101}, {100, 101, 98, 99}}, 5, in)
}

// TestBacktestIsHandComputed: long 2 at bar 0, hold, reverse to short 2 at
// bar 2, flat at bar 3; every fill costs 1·10 + 2 = 12 per contract.
//
//	t0→1 buy 2 at 102:     −24 + 2·(102−101)·10 = −4    E = 9996
//	t1→2 hold:             2·(104−102)·10 + 2·(105−104)·10 = 60    E = 10056
//	t2→3 sell 4 at 102:    2·(103−105)·10 − 48 − 2·(101−103)·10 = −48    E = 10008
//	t3→4 buy 2 at 101:     −2·(100−101)·10 − 24 = −4    E = 10004
//
// Trades: long 102 → 102, PnL −8 (commissions); short 102 → 101,
// 2·1·10 − 8 = 12. Buy-and-hold buys 2 at 102 and sells at 99 − 1 = 98 at
// the end: 9996, 10056, 9976, 9912 (2·(98−102)·10 − 8 = −88).
func TestBacktestIsHandComputed(t *testing.T) {
	ds := btDataset()
	p := &script{acts: map[int]market.Action{0: {Dir: 2, Size: 3}, 1: {Dir: 2, Size: 3}, 2: {Dir: 0, Size: 3}, 3: flat}}
	rep, err := sim.Backtest(ds, market.Range{From: 0, To: 5}, p)
	if err != nil {
		t.Fatal(err)
	}
	wantEq := []float64{10000, 9996, 10056, 10008, 10004}
	wantPos := []int{0, 2, 2, -2, 0}
	for i := range wantEq {
		if !near(rep.Equity[i], wantEq[i], 1e-12) || rep.Positions[i] != wantPos[i] {
			t.Errorf("bar %d: equity %v position %d, want %v %d", i, rep.Equity[i], rep.Positions[i], wantEq[i], wantPos[i])
		}
	}
	// The policy saw its own position: +1 (2 of 2 contracts) at bars 1 and 2.
	if p.seen[0] != 0 || p.seen[1] != 1 || p.seen[2] != 1 || p.seen[3] != -1 || len(p.seen) != 4 {
		t.Errorf("position feature seen by the policy %v, want 0, 1, 1, −1 at bars 0…3", p.seen)
	}
	wantTrades := []sim.Trade{
		{EntryBar: 1, ExitBar: 3, Dir: 1, Contracts: 2, EntryPrice: 102, ExitPrice: 102, PnL: -8},
		{EntryBar: 3, ExitBar: 4, Dir: -1, Contracts: 2, EntryPrice: 102, ExitPrice: 101, PnL: 12},
	}
	if len(rep.TradeLog) != 2 || rep.TradeLog[0] != wantTrades[0] || rep.TradeLog[1] != wantTrades[1] {
		t.Errorf("trades %+v, want %+v", rep.TradeLog, wantTrades)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"total return", rep.TotalReturn, 0.0004},       // 10004/10000 − 1
		{"annual return", rep.AnnualReturn, 0.0004},     // 4 returns at 4 a year: 1 year
		{"max drawdown", rep.MaxDrawdown, 52.0 / 10056}, // peak 10056, trough 10004
		{"calmar", rep.Calmar, 0.0004 / (52.0 / 10056)}, //
		{"cvar 5%", rep.CVaR5, 48.0 / 10056},            // ⌈0.05·4⌉ = 1 worst: 10008/10056 − 1
		{"trades", float64(rep.Trades), 2},              //
		{"win rate", rep.WinRate, 0.5},                  // 1 of 2
		{"profit factor", rep.ProfitFactor, 1.5},        // 12/8
		{"turnover", rep.Turnover, 8140 / 10012.8},      // (2·102 + 4·102 + 2·101)·10 / mean E / 1 year
		{"exposure", rep.Exposure, 0.6},                 // 3 of 5 bars
		{"final equity", rep.FinalEquity, 10004},        //
		{"bars", float64(rep.Bars), 5},                  //
		{"buy-and-hold final equity", rep.BuyAndHold.FinalEquity, 9912},
		{"buy-and-hold total return", rep.BuyAndHold.TotalReturn, -0.0088},
		{"buy-and-hold trades", float64(rep.BuyAndHold.Trades), 1},
		{"buy-and-hold exposure", rep.BuyAndHold.Exposure, 0.8},                  // holds from bar 1
		{"buy-and-hold max drawdown", rep.BuyAndHold.MaxDrawdown, 144.0 / 10056}, // 10056 → 9912
		{"bars per year", rep.BarsPerYear, 4},
	} {
		if !near(c.got, c.want, 1e-12) {
			t.Errorf("%s = %.17g, want %.17g", c.name, c.got, c.want)
		}
	}
	if rep.Flat != (sim.Metrics{Bars: 5, FinalEquity: 10000}) {
		t.Errorf("flat metrics %+v, want only bars 5 and final equity 10000", rep.Flat)
	}
	if !rep.From.Equal(ds.Bars.Time[0]) || !rep.To.Equal(ds.Bars.Time[4]) {
		t.Errorf("from %v to %v, want the first and last bar's times", rep.From, rep.To)
	}
	m := sim.Measure(rep.Equity, rep.Positions, rep.TradeLog, 8140, 4)
	m.Costs, m.CostPerTrade = rep.Costs, rep.CostPerTrade
	if m != rep.Metrics {
		t.Errorf("report metrics %+v differ from Measure of its own records %+v", rep.Metrics, m)
	}
}

// TestPartialFillsMakeOneTrade: 1 contract, add 1, sell 1, sell 1 is one
// round trip with contract-weighted prices. Fills (s = 1): buy at 101+1 =
// 102 and 104+1 = 105, sell at 103−1 = 102 and 100−1 = 99: entry 103.5,
// exit 100.5, PnL (100.5 − 103.5)·2·10 − 4·2 = −68.
func TestPartialFillsMakeOneTrade(t *testing.T) {
	one, two := market.Action{Dir: 2, Size: 0}, market.Action{Dir: 2, Size: 3}
	rep, err := sim.Backtest(btDataset(), market.Range{From: 0, To: 5}, &script{acts: map[int]market.Action{0: one, 1: two, 2: one, 3: flat}})
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Trade{EntryBar: 1, ExitBar: 4, Dir: 1, Contracts: 2, EntryPrice: 103.5, ExitPrice: 100.5, PnL: -68}
	if len(rep.TradeLog) != 1 || rep.TradeLog[0] != want {
		t.Errorf("trades %+v, want [%+v]", rep.TradeLog, want)
	}
	if rep.FinalEquity != 9932 || rep.WinRate != 0 || rep.Trades != 1 {
		t.Errorf("final equity %v win rate %v trades %d, want 9932 0 1", rep.FinalEquity, rep.WinRate, rep.Trades)
	}
}

// TestReportJSONHasMetricsAtTopLevel: the policy's metric keys are at the
// top level, buy_and_hold and flat are objects with the same keys, and the
// per-bar records are not in the JSON.
func TestReportJSONHasMetricsAtTopLevel(t *testing.T) {
	rep, err := sim.Backtest(btDataset(), market.Range{From: 0, To: 5}, &script{acts: map[int]market.Action{0: long2}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	keys := []string{"total_return", "annual_return", "volatility", "sharpe", "sortino", "max_drawdown", "calmar",
		"cvar_5", "trades", "win_rate", "profit_factor", "turnover", "exposure", "bars", "final_equity", "costs", "cost_per_trade"}
	top := []string{"buy_and_hold", "flat", "from", "to", "bars_per_year", "instrument", "cost_per_round_trip_bps"}
	for _, k := range append(keys, top...) {
		if _, ok := got[k]; !ok {
			t.Errorf("top-level key %q missing in %s", k, raw)
		}
	}
	for _, obj := range []string{"buy_and_hold", "flat"} {
		o, _ := got[obj].(map[string]any)
		for _, k := range keys {
			if _, ok := o[k]; !ok {
				t.Errorf("%s.%s missing in %s", obj, k, raw)
			}
		}
		if len(o) != len(keys) {
			t.Errorf("%s has %d keys, want %d", obj, len(o), len(keys))
		}
	}
	if len(got) != len(keys)+len(top) {
		t.Errorf("report has %d top-level keys, want %d: %s", len(got), len(keys)+len(top), raw)
	}
}

// TestTradePnLSumsToEquityChange: with every fill and stop on a random
// walk, the closed trades' P&L adds up to the final minus the initial
// equity, because the backtest ends flat.
func TestTradePnLSumsToEquityChange(t *testing.T) {
	ds := walkDataset(21, 3000)
	rng := rand.New(rand.NewPCG(3, 4))
	p := policyFunc(func(int, []float32) market.Action {
		return market.Action{Dir: rng.IntN(3), Size: rng.IntN(4), Exit: rng.IntN(3)}
	})
	rep, err := sim.Backtest(ds, market.Range{From: 100, To: 3000}, p)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, tr := range rep.TradeLog {
		sum += tr.PnL
	}
	if d := rep.FinalEquity - ds.Instrument.InitialCapital; math.Abs(sum-d) > 1e-6*ds.Instrument.InitialCapital {
		t.Errorf("Σ trade PnL %v, equity change %v", sum, d)
	}
	if rep.Trades < 500 || rep.Trades != len(rep.TradeLog) {
		t.Errorf("%d trades (%d in the log): the random policy should close hundreds", rep.Trades, len(rep.TradeLog))
	}
}

// TestEnvRewardsMatchBacktest: one environment whose window is the whole
// range, fed the actions a policy gives the backtest, earns rewards that,
// scaled back by ATR_t·PV·MaxContracts, sum to the backtest's P&L; with
// the instrument's constant slippage and with per-bar slippage
// (Dataset.Slip) that varies from bar to bar.
func TestEnvRewardsMatchBacktest(t *testing.T) {
	ds := walkDataset(22, 300)
	perBar := *ds
	perBar.Slip = make([]float64, ds.Bars.Len())
	for i := range perBar.Slip {
		perBar.Slip[i] = 0.05 * float64(i%7)
	}
	for _, d := range []*market.Dataset{ds, &perBar} {
		envRewardsMatchBacktest(t, d)
	}
}

func envRewardsMatchBacktest(t *testing.T, ds *market.Dataset) {
	r := market.Range{From: 50, To: 300}
	act := func(t int) market.Action { return market.Action{Dir: t * 7 % 3, Size: t * 5 % 4, Exit: t * 11 % 3} }
	rep, err := sim.Backtest(ds, r, policyFunc(func(t int, _ []float32) market.Action { return act(t) }))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, ds, r, 1, 1000)
	var res sim.StepResult
	sum, abs := 0.0, 0.0
	in := ds.Instrument
	for tb := r.From; tb < r.To-1; tb++ {
		if e.Bar(0) != tb {
			t.Fatalf("env at bar %d, want %d", e.Bar(0), tb)
		}
		step(t, e, &res, act(tb))
		x := float64(res.Reward[0]) * ds.ATR[tb] * in.PointValue * float64(in.MaxContracts)
		sum += x
		abs += math.Abs(x)
		if rep.Positions[tb+1-r.From] != e.Position(0) && !res.Done[0] {
			t.Fatalf("bar %d: env position %d, backtest %d", tb+1, e.Position(0), rep.Positions[tb+1-r.From])
		}
	}
	if !res.Done[0] {
		t.Error("the window did not end at the end of the range")
	}
	if d := rep.FinalEquity - in.InitialCapital; math.Abs(sum-d) > 1e-6*abs {
		t.Errorf("Σ scaled rewards %v, backtest P&L %v", sum, d)
	}
}

// TestBacktestErrorsNameTheProblem.
func TestBacktestErrorsNameTheProblem(t *testing.T) {
	r := market.Range{From: 0, To: 5}
	noYear := btDataset()
	noYear.BarsPerYear = 0
	noCap := btDataset()
	noCap.Instrument.InitialCapital = math.Inf(1)
	noTime := btDataset()
	noTime.Bars.Time = nil
	bad := policyFunc(func(t int, _ []float32) market.Action {
		if t == 2 {
			return market.Action{Dir: 3}
		}
		return flat
	})
	for _, c := range []struct {
		ds   *market.Dataset
		r    market.Range
		p    sim.Policy
		want string
	}{
		{btDataset(), r, nil, "nil policy"},
		{noYear, r, bad, "bars_per_year = 0"},
		{noCap, r, bad, "initial_capital = +Inf"},
		{noTime, r, bad, "Bars.Time has 0 values"},
		{btDataset(), market.Range{From: 3, To: 6}, bad, "range [3, 6)"},
		{btDataset(), r, bad, "policy at bar 2: action direction 3"},
	} {
		if _, err := sim.Backtest(c.ds, c.r, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
}
