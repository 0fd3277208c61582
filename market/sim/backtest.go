package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/stats"
)

// Report is the result of a backtest: the policy's metrics (embedded, so
// their keys are at the top level of the JSON) beside buy-and-hold and flat
// on the same bars and with the same costs. The per-bar records stay out of
// the JSON.
type Report struct {
	Metrics
	BuyAndHold  Metrics   `json:"buy_and_hold"`
	Flat        Metrics   `json:"flat"`
	From        time.Time `json:"from"` // time of the first bar of the range
	To          time.Time `json:"to"`   // time of the last bar of the range
	BarsPerYear float64   `json:"bars_per_year"`
	// Instrument is what the trades were priced with (the dataset's,
	// sized at the range's first fill: market.TradedInstrument), and
	// CostPerRoundTripBps what opening and closing one contract costs at
	// the range's mean close (market.Instrument.RoundTripBps, the instrument's
	// constant slippage even where Dataset.Slip prices it per bar).
	Instrument          market.Instrument `json:"instrument"`
	CostPerRoundTripBps float64           `json:"cost_per_round_trip_bps"`

	Equity    []float64 `json:"-"` // equity in money at the close of each bar of the range
	Positions []int     `json:"-"` // signed contracts held through each bar's close
	TradeLog  []Trade   `json:"-"` // closed round trips in exit order
	// BuyAndHoldEquity is buy-and-hold's equity at each bar (flat's is
	// the initial capital throughout).
	BuyAndHoldEquity []float64 `json:"-"`
}

// SharpeT is the t-statistic of the report's Sharpe ratio: Sharpe·√years,
// the years being its bar returns (Bars − 1) over BarsPerYear. For returns
// of zero mean it is about standard normal, so 2 is about the one-sided
// 2.3 % level, before any choosing among several policies. 0 when the
// report has no bars or no annualisation.
func (r Report) SharpeT() float64 {
	if r.Bars < 2 || !(r.BarsPerYear > 0) {
		return 0
	}
	return r.Sharpe * math.Sqrt(float64(r.Bars-1)/r.BarsPerYear)
}

// Policy chooses the action at bar t of a Dataset from the observation at t
// (ObsDim values: the bar's features, then the agent's). The backtest calls
// it once per bar in time order.
type Policy interface {
	Act(t int, obs []float32) market.Action
}

// Backtest runs policy p greedily over bars r of ds in time order, with
// the fills, costs and stops of VecEnv. At each bar t = r.From … r.To−2 it
// asks p for the action at t with the observation of t (the bar's features
// and the agent features of VecEnv; the slice is reused, so p must not keep
// it), fills it at the open of t+1 and marks equity to the close of t+1.
// Equity starts at the instrument's InitialCapital at the close of r.From
// and the position open at the end is closed at the close of r.To−1 with
// slippage and commission, so the final equity is what a trader could
// take out. Buy-and-hold (long MaxContracts from the first fill, at the
// open of r.From+1, to the end) and flat run on the same range and costs.
// Metrics are annualised with ds.BarsPerYear.
//
// Sizing (market/sizing.go). The policy trades the contract
// market.TradedInstrument sizes at the first fill's price, so that a full
// position is worth the sizing's leverage × the capital there (1× under
// env.sizing "notional"), whichever command runs the backtest;
// buy-and-hold holds 1× the capital at its first fill
// (market.BuyAndHoldInstrument).
//
// Ruin. When equity at a bar's close is at or below the margin floor,
// MarginFloor × InitialCapital (zero by default), trading ends: the
// position is closed at that close with slippage and commission, the
// policy is not asked again and the account stays flat to the end of the
// range. Equity below zero is a debt the account cannot pay: the curve
// records 0 from there on and Metrics.RuinShortfall the debt. Metrics
// names the bar (RuinBar, RuinTime), so a ruined run reads as a total
// return of at least −100 % and a drawdown of at most 100 %, never the
// impossible numbers an account trading on below zero would give.
//
// An error names the field, the bar or the action that is unusable.
func Backtest(ds *market.Dataset, r market.Range, p Policy) (Report, error) {
	return BacktestWith(ds, r, p, nil)
}

// Benchmarks are buy-and-hold and flat over one range of a dataset, the
// comparison every Report carries. They do not depend on the policy, so a
// caller that backtests many policies on one range (an epoch's
// validation) computes them once (NewBenchmarks) and passes them to
// BacktestWith.
type Benchmarks struct {
	ds               *market.Dataset
	r                market.Range
	BuyAndHold, Flat Metrics
	BuyAndHoldEquity []float64
}

// NewBenchmarks runs buy-and-hold and flat over bars r of ds (Backtest).
// Buy-and-hold holds MaxContracts of the contract
// market.BuyAndHoldInstrument sizes, 1× the capital at its first fill;
// flat trades nothing.
func NewBenchmarks(ds *market.Dataset, r market.Range) (*Benchmarks, error) {
	b := &Benchmarks{ds: ds, r: r}
	for _, x := range []struct {
		a          market.Action
		buyAndHold bool
		dst        *Metrics
		equity     *[]float64
	}{
		{market.Action{Dir: 2, Size: market.NumSizes - 1}, true, &b.BuyAndHold, &b.BuyAndHoldEquity},
		{market.Action{Dir: 1}, false, &b.Flat, nil},
	} {
		s, err := newBacktestEngine(ds, r, x.buyAndHold)
		if err != nil {
			return nil, fmt.Errorf("backtest: %w", err)
		}
		pa, err := s.run(r, constPolicy(x.a))
		if err != nil {
			return nil, fmt.Errorf("backtest %s: benchmark: %w", r, err)
		}
		*x.dst = pa.measure(ds)
		if x.equity != nil {
			*x.equity = pa.equity
		}
	}
	return b, nil
}

// For reports whether b was computed for bars r of ds.
func (b *Benchmarks) For(ds *market.Dataset, r market.Range) bool {
	return b != nil && b.ds == ds && b.r == r
}

// BacktestWith is Backtest with the benchmarks b of the same dataset and
// range (NewBenchmarks), or computed when b is nil.
func BacktestWith(ds *market.Dataset, r market.Range, p Policy, b *Benchmarks) (Report, error) {
	if p == nil {
		return Report{}, fmt.Errorf("backtest: nil policy")
	}
	return backtestRun(ds, r, b, func(s *engine) (runRecord, error) { return s.run(r, p) })
}

// backtestRun checks ds and r, walks the range with run and books the
// report (BacktestWith).
func backtestRun(ds *market.Dataset, r market.Range, b *Benchmarks, run func(*engine) (runRecord, error)) (Report, error) {
	s, err := newBacktestEngine(ds, r, false)
	if err != nil {
		return Report{}, fmt.Errorf("backtest: %w", err)
	}
	switch {
	case !(ds.BarsPerYear > 0) || math.IsInf(ds.BarsPerYear, 0):
		return Report{}, fmt.Errorf("backtest: dataset bars_per_year = %g: must be finite and positive", ds.BarsPerYear)
	case !(ds.Instrument.InitialCapital > 0) || math.IsInf(ds.Instrument.InitialCapital, 0):
		return Report{}, fmt.Errorf("backtest: instrument initial_capital = %g: must be finite and positive", ds.Instrument.InitialCapital)
	case len(ds.Bars.Time) != ds.Bars.Len():
		return Report{}, fmt.Errorf("backtest: dataset %q: Bars.Time has %d values, want %d", ds.Bars.Name, len(ds.Bars.Time), ds.Bars.Len())
	}
	rep := Report{From: ds.Bars.Time[r.From], To: ds.Bars.Time[r.To-1], BarsPerYear: ds.BarsPerYear,
		Instrument: s.in, CostPerRoundTripBps: s.in.RoundTripBps(meanClose(ds.Bars, r))}
	pol, err := run(s)
	if err != nil {
		return Report{}, fmt.Errorf("backtest %s: %w", r, err)
	}
	rep.Metrics = pol.measure(ds)
	rep.Equity, rep.Positions, rep.TradeLog = pol.equity, pol.positions, pol.trades
	if b == nil {
		if b, err = NewBenchmarks(ds, r); err != nil {
			return Report{}, err
		}
	} else if !b.For(ds, r) {
		return Report{}, fmt.Errorf("backtest %s: benchmarks given for range %s or another dataset", r, b.r)
	}
	rep.BuyAndHold, rep.Flat = b.BuyAndHold, b.Flat
	rep.BuyAndHoldEquity = append([]float64(nil), b.BuyAndHoldEquity...)
	return rep, nil
}

// newBacktestEngine is newEngine with the contract sized for a backtest
// over r (market.TradedInstrument), or for buy-and-hold over r
// (market.BuyAndHoldInstrument).
func newBacktestEngine(ds *market.Dataset, r market.Range, buyAndHold bool) (*engine, error) {
	s, err := newEngine(ds, r)
	if err != nil {
		return nil, err
	}
	size := market.TradedInstrument
	if buyAndHold {
		size = market.BuyAndHoldInstrument
	}
	in, err := size(ds, r)
	if err == nil && in.Sizing != "" {
		err = in.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", ds.Bars.Name, err)
	}
	s.in = in
	return s, nil
}

// constPolicy is the policy that always takes the same action.
type constPolicy market.Action

// Act returns the constant action.
func (c constPolicy) Act(int, []float32) market.Action { return market.Action(c) }

// meanClose is the mean close of bars r.
func meanClose(b *prices.Bars, r market.Range) float64 {
	return stats.Mean(b.Close[r.From:r.To])
}

// runRecord is the record of one backtest run.
type runRecord struct {
	equity    []float64
	positions []int
	trades    []Trade
	traded    float64 // Σ |qty|·|price|·PointValue over all fills
	costs     float64 // Σ cost over all fills
	ruinBar   int     // bar index where trading ended; 0 when never
	shortfall float64 // debt beyond zero equity at the ruin, ≥ 0
}

func (pa *runRecord) measure(ds *market.Dataset) Metrics {
	m := Measure(pa.equity, pa.positions, pa.trades, pa.traded, ds.BarsPerYear)
	m.Costs = finite(pa.costs)
	if m.Trades > 0 {
		m.CostPerTrade = m.Costs / float64(m.Trades)
	}
	if pa.ruinBar > 0 {
		m.RuinBar = pa.ruinBar
		t := ds.Bars.Time[pa.ruinBar]
		m.RuinTime = &t
		m.RuinShortfall = finite(pa.shortfall)
	}
	return m
}

// run walks bars r with policy p (see Backtest).
func (s *engine) run(r market.Range, p Policy) (runRecord, error) {
	w := s.newWalk(r)
	obs := make([]float32, market.ObsDim)
	for w.t < r.To-1 {
		if w.pa.ruinBar > 0 {
			w.flat()
			continue
		}
		s.observe(&w.acc, w.t, obs)
		if err := w.act(p.Act(w.t, obs)); err != nil {
			return runRecord{}, err
		}
	}
	return w.record(), nil
}

// walk is a backtest in progress: the account, equity and trade book after
// the decisions before bar t. Copying a walk saves its state: the copy
// shares the per-bar slices and the book's trades, whose entries at and
// after t it rewrites when it goes on, so a copy taken at bar t resumes
// from t (BacktestBatch).
type walk struct {
	s     *engine
	r     market.Range
	t     int // next decision bar
	pa    runRecord
	book  tradeBook
	e     float64
	floor float64
	acc   account
	fills []fill
	// decisions counts the actions taken (the policy's calls in Backtest).
	decisions int
}

// newWalk starts a walk over bars r with the initial capital.
func (s *engine) newWalk(r market.Range) *walk {
	n := r.Len()
	w := &walk{s: s, r: r, t: r.From, pa: runRecord{equity: make([]float64, n), positions: make([]int, n)},
		book: tradeBook{pv: s.in.PointValue}, e: s.in.InitialCapital, floor: s.in.MarginFloor * s.in.InitialCapital}
	w.pa.equity[0] = w.e
	return w
}

// flat moves a ruined walk one bar on: flat, equity unchanged.
func (w *walk) flat() {
	w.pa.equity[w.t+1-w.r.From] = w.e
	w.t++
}

// act takes action a at bar t: fill at the next open, stops inside the
// bar, mark to its close, liquidation at the end of the range or at the
// margin floor (Backtest).
func (w *walk) act(a market.Action) error {
	if err := a.Check(); err != nil {
		return fmt.Errorf("policy at bar %d: %w", w.t, err)
	}
	t, i := w.t, w.t+1-w.r.From
	w.decisions++
	w.fills = w.fills[:0]
	w.e += w.s.step(&w.acc, a, t, &w.fills)
	w.pa.positions[i] = w.acc.pos
	if w.e <= w.floor || t+1 == w.r.To-1 {
		w.e += w.s.liquidate(&w.acc, t+1, &w.fills)
	}
	if w.e <= w.floor {
		w.pa.ruinBar = t + 1
		w.pa.positions[i] = 0
		if w.e < 0 {
			w.pa.shortfall, w.e = -w.e, 0
		}
	}
	w.pa.equity[i] = w.e
	for _, f := range w.fills {
		w.book.add(f)
	}
	w.t++
	return nil
}

// record is the walk's record once it reached the end of its range.
func (w *walk) record() runRecord {
	pa := w.pa
	pa.trades, pa.traded, pa.costs = w.book.trades, w.book.traded, w.book.costs
	return pa
}

// tradeBook splits a stream of fills into round trips.
type tradeBook struct {
	pv float64

	pos           int     // position after the fills so far
	cur           Trade   // the open trade (when pos ≠ 0)
	inQty, outQty int     // contracts that opened or added / reduced or closed it
	inSum, outSum float64 // Σ contracts × fill price of those fills
	cash          float64 // the open trade's cash flow, Σ −qty·price·PV − |qty|·Commission

	trades []Trade
	traded float64
	costs  float64
}

// add books one fill: the part against the open position closes (part of)
// it, the rest opens or adds. A reversal closes one trade and opens one.
func (b *tradeBook) add(f fill) {
	b.traded += float64(abs(f.qty)) * math.Abs(f.price) * b.pv
	b.costs += f.cost
	perContract := f.comm / float64(abs(f.qty)) // commission of one contract of this fill
	q := f.qty
	if b.pos != 0 && sign(q) != sign(b.pos) {
		c := min(abs(q), abs(b.pos)) // contracts that reduce the open trade
		d := sign(q) * c
		b.outQty += c
		b.outSum += float64(c) * f.price
		b.cash += -float64(d)*f.price*b.pv - float64(c)*perContract
		b.pos += d
		q -= d
		if b.pos == 0 {
			b.cur.ExitBar = f.bar
			b.cur.EntryPrice = b.inSum / float64(b.inQty)
			b.cur.ExitPrice = b.outSum / float64(b.outQty)
			b.cur.PnL = b.cash
			b.trades = append(b.trades, b.cur)
		}
	}
	if q == 0 {
		return
	}
	if b.pos == 0 {
		b.cur = Trade{EntryBar: f.bar, Dir: sign(q)}
		b.inQty, b.outQty, b.inSum, b.outSum, b.cash = 0, 0, 0, 0, 0
	}
	b.inQty += abs(q)
	b.inSum += float64(abs(q)) * f.price
	b.cash += -float64(q)*f.price*b.pv - float64(abs(q))*perContract
	b.pos += q
	b.cur.Contracts = max(b.cur.Contracts, abs(b.pos))
}
