package sim_test

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// TestFillPaysHalfTheSpread is btDataset (slippage 1 tick of 1, commission
// 2, PV 10, 2 contracts) with bid/ask: the spread is 4 at bar 1's open and
// 1 at bar 2's, so a fill there moves 2 and 0.5 against the order instead
// of the constant 1.
//
//	t0→1 buy 2 at 101 + 2 = 103:  −2·(2·10 + 2) + 2·(102−101)·10 = −24     E = 9976
//	t1→2 sell 2 at 104 − 0.5:     2·(104−102)·10 − 2·(0.5·10 + 2) = 26     E = 10002
//
// One trade, long 103 → 103.5: 2·0.5·10 − 4·2 = 2.
func TestFillPaysHalfTheSpread(t *testing.T) {
	ds := btDataset()
	ds.Bars.Spread = []float64{0, 4, 1, 0, 0}
	ds.Slip = market.SpreadSlip(ds.Bars)
	if want := []float64{0, 2, 0.5, 0, 0}; !reflect.DeepEqual(ds.Slip, want) {
		t.Fatalf("SpreadSlip %v, want %v", ds.Slip, want)
	}
	p := &script{acts: map[int]market.Action{0: {Dir: 2, Size: 3}}}
	rep, err := sim.Backtest(ds, market.Range{From: 0, To: 5}, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{10000, 9976, 10002, 10002, 10002}; !reflect.DeepEqual(rep.Equity, want) {
		t.Errorf("equity %v, want %v", rep.Equity, want)
	}
	want := sim.Trade{EntryBar: 1, ExitBar: 2, Dir: 1, Contracts: 2, EntryPrice: 103, ExitPrice: 103.5, PnL: 2}
	if len(rep.TradeLog) != 1 || rep.TradeLog[0] != want {
		t.Errorf("trades %+v, want %+v", rep.TradeLog, want)
	}
	if rep.Costs != 44+14 {
		t.Errorf("costs %g, want 44 + 14", rep.Costs)
	}
	// A bad quote is refused with its bar.
	ds.Slip[3] = math.NaN()
	if _, err := sim.Backtest(ds, market.Range{From: 0, To: 5}, p); err == nil || !strings.Contains(err.Error(), "bar 3") {
		t.Errorf("NaN slippage at bar 3: %v, want an error naming bar 3", err)
	}
}

// TestBacktestPerBarSlipVersusConstant: per-bar slippage equal to the
// instrument's constant at every bar books the same report bit for bit as
// the constant (stops, reversals and the liquidation included), and
// per-bar slippage of twice it books what an instrument of twice the
// slippage books; a spread that varies costs more where it is wider.
func TestBacktestPerBarSlipVersusConstant(t *testing.T) {
	ds := walkDataset(3, 600)
	r := market.Range{From: 0, To: ds.Bars.Len()}
	rng := rand.New(rand.NewPCG(5, 5))
	acts := make([]market.Action, ds.Bars.Len())
	for i := range acts {
		acts[i] = market.Action{Dir: rng.IntN(3), Size: rng.IntN(market.NumSizes), Exit: rng.IntN(market.NumExits)}
	}
	pol := policyFunc(func(t int, _ []float32) market.Action { return acts[t] })
	run := func(d *market.Dataset) sim.Report {
		t.Helper()
		rep, err := sim.Backtest(d, r, pol)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	constant := run(ds)
	slip := ds.Instrument.SlippageTicks * ds.Instrument.TickSize
	same := *ds
	same.Slip = make([]float64, ds.Bars.Len())
	for i := range same.Slip {
		same.Slip[i] = slip
	}
	if got := run(&same); !reflect.DeepEqual(got, constant) {
		t.Errorf("per-bar slippage equal to the constant: Sharpe %v return %v costs %v, constant %v %v %v",
			got.Sharpe, got.TotalReturn, got.Costs, constant.Sharpe, constant.TotalReturn, constant.Costs)
	}
	if constant.Trades < 20 {
		t.Fatalf("the random policy made %d trades; the test needs many", constant.Trades)
	}
	double := same
	double.Slip = make([]float64, len(same.Slip))
	for i := range double.Slip {
		double.Slip[i] = 2 * slip
	}
	twice := *ds
	twice.Instrument.SlippageTicks *= 2
	if got, want := run(&double), run(&twice); !reflect.DeepEqual(got.Equity, want.Equity) || got.Costs != want.Costs {
		t.Errorf("per-bar slippage of twice the constant: final equity %v, costs %v; instrument of twice the slippage: %v, %v",
			got.Equity[len(got.Equity)-1], got.Costs, want.Equity[len(want.Equity)-1], want.Costs)
	}
	wide := same
	wide.Slip = append([]float64(nil), same.Slip...)
	for i := range wide.Slip {
		if i%2 == 1 {
			wide.Slip[i] = 5 * slip
		}
	}
	if got := run(&wide); !(got.Costs > constant.Costs) || !(got.Equity[len(got.Equity)-1] < constant.Equity[len(constant.Equity)-1]) {
		t.Errorf("wider spreads on odd bars: costs %v, final equity %v; constant %v, %v: want more costs, less equity",
			got.Costs, got.Equity[len(got.Equity)-1], constant.Costs, constant.Equity[len(constant.Equity)-1])
	}
}

// TestBacktestSizesAtTheFirstFill: on a prepared dataset every range's
// contract is sized at its first fill, so a full position there is worth
// the capital (notional) and buy-and-hold is 1× notional; an always-long
// full policy is buy-and-hold bit for bit; under vol_target the policy's
// contract is L× and buy-and-hold's still 1×.
func TestBacktestSizesAtTheFirstFill(t *testing.T) {
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.SyntheticBars = prices.SyntheticPath, 3000
	ctx := context.Background()
	ds, err := market.Prepare(ctx, prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	capital, mc := cfg.Env.InitialCapital, float64(cfg.Env.MaxContracts)
	long := policyFunc(func(int, []float32) market.Action { return market.Action{Dir: 2, Size: market.NumSizes - 1} })
	for _, r := range []market.Range{ds.Valid, ds.Test} {
		rep, err := sim.Backtest(ds, r, long)
		if err != nil {
			t.Fatal(err)
		}
		first := ds.Bars.Open[r.From+1]
		if got := rep.Instrument.PointValue * mc * first; math.Abs(got/capital-1) > 1e-12 {
			t.Errorf("range %s: a full position at the first fill is worth %v, want the capital %v", r, got, capital)
		}
		if !reflect.DeepEqual(rep.Metrics, rep.BuyAndHold) {
			t.Errorf("range %s: always long full %+v differs from buy-and-hold %+v", r, rep.Metrics, rep.BuyAndHold)
		}
		bh, err := market.BuyAndHoldInstrument(ds, r)
		if err != nil || bh != rep.Instrument {
			t.Errorf("range %s: buy-and-hold's contract %+v (%v), the policy's %+v: under notional they are one", r, bh, err, rep.Instrument)
		}
	}
	cfg.Env.Sizing, cfg.Env.TargetVol = config.SizingVolTarget, 0.5
	vt, err := market.Prepare(ctx, prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lev := vt.Instrument.Leverage
	want, _ := market.Sizing(cfg.Env, vt.Bars, vt.Train, vt.BarsPerYear)
	if lev != want || lev == 1 {
		t.Fatalf("vol_target leverage %v, want Sizing on the training range %v (and not 1)", lev, want)
	}
	rep, err := sim.Backtest(vt, vt.Test, long)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Instrument.PointValue * mc * vt.Bars.Open[vt.Test.From+1]; math.Abs(got/(lev*capital)-1) > 1e-12 {
		t.Errorf("vol_target: a full position is worth %v, want %v × %v", got, lev, capital)
	}
	bh, _ := market.BuyAndHoldInstrument(vt, vt.Test)
	if got := bh.PointValue * mc * vt.Bars.Open[vt.Test.From+1]; math.Abs(got/capital-1) > 1e-12 {
		t.Errorf("vol_target: buy-and-hold holds %v, want 1× the capital %v", got, capital)
	}
}

// TestBidAskBarsPayTheirSpread: bars that quote bid and ask (Bars.Spread)
// get per-bar slippage of half the spread from PrepareWith (as from
// Prepare), and a backtest on them pays it: with a spread twice the
// constant slippage at every bar, it books what the constant doubled does.
func TestBidAskBarsPayTheirSpread(t *testing.T) {
	b := walkDataset(4, 400).Bars
	in := market.Instrument{TickSize: 0.25, SlippageTicks: 1, Commission: 0.62, PointValue: 5, MaxContracts: 4, InitialCapital: 100000}
	withSpread := *b
	withSpread.Spread = make([]float64, b.Len())
	for i := range withSpread.Spread {
		withSpread.Spread[i] = 4 * in.SlippageTicks * in.TickSize // half of it is twice the constant
	}
	ds, err := market.PrepareWith(&withSpread, market.Normalizer{}, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Slip) != b.Len() || ds.Slip[7] != 2*in.SlippageTicks*in.TickSize {
		t.Fatalf("PrepareWith on bid/ask bars: Slip of %d values, Slip[7] = %v; want %d values of %v", len(ds.Slip), ds.Slip[7], b.Len(), 2*in.SlippageTicks*in.TickSize)
	}
	twice := in
	twice.SlippageTicks *= 2
	ref, err := market.PrepareWith(b, market.Normalizer{}, twice)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Slip != nil {
		t.Fatalf("bars without a spread got per-bar slippage %v", ref.Slip[:3])
	}
	pol := policyFunc(func(t int, _ []float32) market.Action { return market.Action{Dir: t % 3, Size: t % 4} })
	got, err1 := sim.Backtest(ds, ds.Valid, pol)
	want, err2 := sim.Backtest(ref, ref.Valid, pol)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if got.Costs != want.Costs || got.FinalEquity != want.FinalEquity || got.Trades < 10 {
		t.Errorf("half the spread: costs %v, final equity %v, %d trades; twice the constant: %v, %v", got.Costs, got.FinalEquity, got.Trades, want.Costs, want.FinalEquity)
	}
}
