package walkforward

import (
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/stats"
)

// The baselines trade the same Dataset as the agent, so the same
// instrument, sizing and costs (sim.Backtest): a full position is
// MaxContracts contracts (Action Size NumSizes−1), worth the instrument's
// full notional at the last training bar; buy-and-hold holds one from the
// first fill to the end (1× notional).
var (
	flatAction = market.Action{Dir: 1}
	longAction = market.Action{Dir: 2, Size: market.NumSizes - 1}
)

// constant is the policy that always takes one action.
type constant market.Action

func (c constant) Act(int, []float32) market.Action { return market.Action(c) }

// Flat is the policy that never trades: what an abstaining run trades.
func Flat() sim.Policy { return constant(flatAction) }

// BuyAndHold is the policy that holds a full long position throughout.
func BuyAndHold() sim.Policy { return constant(longAction) }

// Momentum is the time-series momentum rule of Moskowitz, Ooi and
// Pedersen (2012, "Time series momentum", JFE 104(2)): at bar t it holds
// the sign of the past return over Lookback bars, close[t]/close[t−
// Lookback] − 1, scaled by volatility: the share min(1, TargetVol/σ_t) of
// a full position, σ_t the sample standard deviation of the VolWindow log
// returns ln(close[i]/close[i−1]) up to bar t (ex ante: nothing after t).
// The share is rounded to the nearest of the environment's sizes (¼, ½,
// ¾, 1 of MaxContracts) and is at least ¼: the rule is in the market
// whenever it has a sign. It is flat where the past return is zero,
// before it has Lookback bars or VolWindow returns of history, and it
// takes a full position where σ_t is 0. Like the agent it decides at bar
// t's close and fills at the next open, paying the same costs.
//
// The paper sizes to a 40 % annual volatility with leverage; here a
// position may not exceed the agent's full position (1× notional), so
// TargetVol is set below the series' typical volatility (half the
// training range's, ChooseMomentum) to leave room to scale up in calm
// markets.
type Momentum struct {
	Lookback  int     `json:"lookback"`
	VolWindow int     `json:"vol_window"`
	TargetVol float64 `json:"target_vol"` // per bar, of log returns
}

// Position is the rule's signed share of a full position at bar t of
// close, before rounding to a size: −1 … 1.
func (m Momentum) Position(close []float64, t int) float64 {
	if t < m.Lookback || t < m.VolWindow || t >= len(close) || m.Lookback < 1 || m.VolWindow < 2 {
		return 0
	}
	var dir float64
	switch past := close[t] - close[t-m.Lookback]; {
	case past > 0:
		dir = 1
	case past < 0:
		dir = -1
	default:
		return 0
	}
	r := make([]float64, m.VolWindow)
	for i := range r {
		j := t - m.VolWindow + 1 + i
		r[i] = math.Log(close[j] / close[j-1])
	}
	sd := stats.StdDev(r)
	if !(sd > 0) {
		return dir
	}
	return dir * min(1, m.TargetVol/sd)
}

// Action is Position as the environment's action: the direction and the
// nearest size, ¼ of a full position at least.
func (m Momentum) Action(close []float64, t int) market.Action {
	return sizeAction(m.Position(close, t))
}

// sizeAction is signed share p of a full position as an action.
func sizeAction(p float64) market.Action {
	if p == 0 {
		return flatAction
	}
	k := min(market.NumSizes, max(1, int(math.Round(math.Abs(p)*market.NumSizes))))
	dir := 2
	if p < 0 {
		dir = 0
	}
	return market.Action{Dir: dir, Size: k - 1}
}

// Policy is m on the closes of b: Action at every bar, with σ_t kept as
// running sums over the series (computed once here, O(bars)) instead of
// Position's VolWindow logarithms a bar. The two agree to rounding
// (TestMomentumPolicyIsPosition).
func (m Momentum) Policy(b *prices.Bars) sim.Policy {
	c := b.Close
	p := momentumPolicy{m: m, close: c}
	if m.VolWindow < 2 || m.Lookback < 1 || len(c) <= m.VolWindow {
		return p
	}
	// Prefix sums of the log returns, centred on their mean to keep the
	// variance's cancellation small.
	n := len(c)
	lr := make([]float64, n)
	for i := 1; i < n; i++ {
		lr[i] = math.Log(c[i] / c[i-1])
	}
	mu := stats.Mean(lr[1:])
	s1, s2 := make([]float64, n), make([]float64, n)
	for i := 1; i < n; i++ {
		x := lr[i] - mu
		s1[i], s2[i] = s1[i-1]+x, s2[i-1]+x*x
	}
	v := float64(m.VolWindow)
	p.sd = make([]float64, n)
	for t := m.VolWindow; t < n; t++ {
		a, q := s1[t]-s1[t-m.VolWindow], s2[t]-s2[t-m.VolWindow]
		p.sd[t] = math.Sqrt(max(0, (q-a*a/v)/(v-1)))
	}
	return p
}

type momentumPolicy struct {
	m     Momentum
	close []float64
	sd    []float64 // σ_t at each bar from VolWindow on; nil: Position's
}

func (p momentumPolicy) Act(t int, _ []float32) market.Action {
	if p.sd == nil {
		return p.m.Action(p.close, t)
	}
	m := p.m
	if t < m.Lookback || t < m.VolWindow || t >= len(p.close) {
		return flatAction
	}
	var dir float64
	switch past := p.close[t] - p.close[t-m.Lookback]; {
	case past > 0:
		dir = 1
	case past < 0:
		dir = -1
	default:
		return flatAction
	}
	// Below 1e-12 of the window's returns the running sums are noise: a
	// riskless window, as Position's exact zero.
	if sd := p.sd[t]; sd > 1e-12 {
		return sizeAction(dir * min(1, m.TargetVol/sd))
	}
	return sizeAction(dir)
}

// MomentumLookbacks is the grid ChooseMomentum searches, in calendar
// time (converted to bars with the series' bars a year): a week, one,
// three, six and twelve months, the lookbacks Moskowitz, Ooi and Pedersen
// report (twelve months their main one) and a short one for the bar
// sizes of the corpus.
var MomentumLookbacks = []Period{{Days: 7}, {Months: 1}, {Months: 3}, {Months: 6}, {Years: 1}}

// MomentumVolWindow is the span σ_t is measured over: a month.
var MomentumVolWindow = Period{Months: 1}

// MomentumChoice is the momentum rule ChooseMomentum picked and on what.
type MomentumChoice struct {
	Rule     Momentum `json:"rule"`
	Lookback Period   `json:"lookback"`
	// TrainSharpe is its Sharpe on the training range (bar returns,
	// annualised), the best of the grid.
	TrainSharpe float64 `json:"train_sharpe"`
}

// ChooseMomentum picks the momentum rule for ds from bars train only
// (the window's training range, ds.Train): TargetVol half the training
// range's per-bar volatility of log returns, VolWindow a month of bars,
// and the lookback of MomentumLookbacks whose rule has the best Sharpe
// on train (the shortest on a tie). Nothing after train.To−1 is read.
func ChooseMomentum(ds *market.Dataset, train market.Range) (MomentumChoice, error) {
	b := ds.Bars
	if train.From < 1 || train.To > b.Len() || train.Len() < 3 {
		return MomentumChoice{}, fmt.Errorf("momentum on %s: training range %s of %d bars: want at least 3 bars after the first", b.Name, train, b.Len())
	}
	lr := make([]float64, train.Len())
	for i := range lr {
		t := train.From + i
		lr[i] = math.Log(b.Close[t] / b.Close[t-1])
	}
	bars := func(p Period) int { return max(2, int(math.Round(ds.BarsPerYear*p.InYears()))) }
	base := Momentum{VolWindow: bars(MomentumVolWindow), TargetVol: stats.StdDev(lr) / 2}
	bench, err := sim.NewBenchmarks(ds, train)
	if err != nil {
		return MomentumChoice{}, fmt.Errorf("momentum on %s: %w", b.Name, err)
	}
	var best MomentumChoice
	for i, p := range MomentumLookbacks {
		m := base
		m.Lookback = bars(p)
		rep, err := sim.BacktestWith(ds, train, m.Policy(b), bench)
		if err != nil {
			return best, fmt.Errorf("momentum %s on %s: %w", p, b.Name, err)
		}
		if i == 0 || rep.Sharpe > best.TrainSharpe {
			best = MomentumChoice{Rule: m, Lookback: p, TrainSharpe: rep.Sharpe}
		}
	}
	return best, nil
}

// BestRule backtests rules (sim.Rules: momentum and reversal over bar
// lookbacks, long-short and long-only, full positions) on bars valid of
// ds and returns the index of the one of best Sharpe (the first listed on
// a tie) and its report: how the yardstick is chosen wherever it stands
// beside a checkpoint (walkforward, baselines, evaluate).
func BestRule(ds *market.Dataset, valid market.Range, rules []sim.Rule) (int, sim.Report, error) {
	var rep sim.Report
	if len(rules) == 0 {
		return 0, rep, fmt.Errorf("best rule: no rules")
	}
	bench, err := sim.NewBenchmarks(ds, valid)
	if err != nil {
		return 0, rep, err
	}
	best := -1
	for j, r := range rules {
		v, err := sim.BacktestWith(ds, valid, r.Policy(ds.Bars), bench)
		if err != nil {
			return 0, rep, fmt.Errorf("%s: %w", r.Name(), err)
		}
		if best < 0 || v.Sharpe > rep.Sharpe {
			best, rep = j, v
		}
	}
	return best, rep, nil
}

// Baselines runs the study's baselines on series window sw, whose
// Dataset ds was prepared for it (ds.Train, Valid and Test are sw's
// ranges): flat, buy-and-hold, time-series momentum chosen on the
// training range (ChooseMomentum) and the simple rule of rules chosen on
// validation (BestRule), each backtested on the test range, whose
// benchmarks bench are (nil: computed). inTraining is copied into each
// Result (whether the agent trained on the series).
func Baselines(ds *market.Dataset, sw SeriesWindow, rules []sim.Rule, inTraining bool, bench *sim.Benchmarks) ([]Result, error) {
	if err := sameRanges(ds, sw); err != nil {
		return nil, err
	}
	test := ds.Test
	if bench == nil {
		var err error
		if bench, err = sim.NewBenchmarks(ds, test); err != nil {
			return nil, fmt.Errorf("window %d, %s: %w", sw.Window, sw.Series, err)
		}
	}
	mom, err := ChooseMomentum(ds, ds.Train)
	if err != nil {
		return nil, fmt.Errorf("window %d: %w", sw.Window, err)
	}
	ri, _, err := BestRule(ds, ds.Valid, rules)
	if err != nil {
		return nil, fmt.Errorf("window %d, %s: %w", sw.Window, sw.Series, err)
	}
	var out []Result
	for _, b := range []struct {
		strategy, detail string
		p                sim.Policy
	}{
		{StrategyFlat, "", Flat()},
		{StrategyBuyAndHold, "", BuyAndHold()},
		{StrategyMomentum, fmt.Sprintf("lookback %s (%d bars), vol window %d bars, target vol %.3g%% a bar", mom.Lookback, mom.Rule.Lookback, mom.Rule.VolWindow, 100*mom.Rule.TargetVol), mom.Rule.Policy(ds.Bars)},
		{StrategyBestRule, rules[ri].Name(), rules[ri].Policy(ds.Bars)},
	} {
		rep, err := sim.BacktestWith(ds, test, b.p, bench)
		if err != nil {
			return nil, fmt.Errorf("window %d, %s, %s: %w", sw.Window, sw.Series, b.strategy, err)
		}
		r, err := NewResult(Result{Window: sw.Window, Series: sw.Series, Strategy: b.strategy, Detail: b.detail, InTraining: inTraining}, ds, test, rep)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// sameRanges checks that ds was split as sw says (the config's times
// and Windows' indices agree).
func sameRanges(ds *market.Dataset, sw SeriesWindow) error {
	if ds.Train != sw.Train || ds.Valid != sw.Valid || ds.Test != sw.Test {
		return fmt.Errorf("window %d, %s: the dataset splits its bars into training %s, validation %s and test %s; the window says %s, %s and %s",
			sw.Window, sw.Series, ds.Train, ds.Valid, ds.Test, sw.Train, sw.Valid, sw.Test)
	}
	return nil
}
