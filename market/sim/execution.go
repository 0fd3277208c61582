package sim

import (
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/market"
)

// This file holds the trading arithmetic that VecEnv and Backtest share:
// fills at the next open with slippage and commission, stops inside the
// bar, mark to the close and the final liquidation. VecEnv's doc comment
// states the rules.

// account is one environment's position between decisions.
type account struct {
	pos   int     // signed contracts
	entry float64 // contract-weighted average fill price of the open position; 0 when flat
	stop  float64 // stop price, used when pos ≠ 0 and exit > 0; 0 when flat
	exit  int     // exit rule of the open position; 0 when flat
	held  int     // bar closes the open position has been held through; 0 when flat
}

// fill is one execution: qty signed contracts (+ bought, − sold) at price
// (slippage included) at the open (or, for stops and liquidation, inside
// or at the close) of bar. comm is the commission it paid in money and
// cost all it paid, slippage and commission: |qty|·slip·PointValue + comm.
type fill struct {
	bar   int
	qty   int
	price float64
	comm  float64
	cost  float64
}

// engine is the trading arithmetic over one checked Dataset.
type engine struct {
	ds *market.Dataset
	in market.Instrument
	// size is contracts(k) of every valid size k, worked out once: the
	// batched backtest asks for it several times per row it simulates.
	size [market.NumSizes]int
}

// fillCost is the money one fill of |q| contracts at bar t and reference
// price p pays: |q|·(slipAt(t, p)·PointValue + Comm(p)).
func (s *engine) fillCost(q, t int, p float64) float64 {
	return float64(abs(q)) * (s.slipAt(t, p)*s.in.PointValue + s.in.Comm(p))
}

// slipAt is the slippage of one fill at bar t and price p, in price
// points: the bar's own (Dataset.Slip[t]) where the dataset has per-bar
// slippage, else the instrument's Slip(p).
func (s *engine) slipAt(t int, p float64) float64 {
	if s.ds.Slip != nil {
		return s.ds.Slip[t]
	}
	return s.in.Slip(p)
}

// newEngine checks that ds can be traded over r: consistent lengths, at least
// two bars, finite prices and ATR inside r, and a usable instrument.
func newEngine(ds *market.Dataset, r market.Range) (*engine, error) {
	if ds == nil || ds.Bars == nil {
		return nil, fmt.Errorf("dataset has no bars")
	}
	b := ds.Bars
	n := b.Len()
	name := b.Name
	for _, c := range []struct {
		field string
		got   int
		want  int
	}{
		{"Bars.Open", len(b.Open), n}, {"Bars.High", len(b.High), n}, {"Bars.Low", len(b.Low), n},
		{"ATR", len(ds.ATR), n}, {"Features", len(ds.Features), n * market.NumFeatures}, {"Slip", len(ds.Slip), n},
	} {
		if c.field == "Slip" && ds.Slip == nil {
			continue
		}
		if c.got != c.want {
			return nil, fmt.Errorf("dataset %q: %s has %d values, want %d (%d bars)", name, c.field, c.got, c.want, n)
		}
	}
	if r.From < 0 || r.To > n || r.Len() < 2 {
		return nil, fmt.Errorf("dataset %q: range %s: need at least 2 bars inside [0, %d)", name, r, n)
	}
	in := ds.Instrument
	for _, c := range []struct {
		field string
		v     float64
		ok    bool
		want  string
	}{
		{"point_value", in.PointValue, in.PointValue > 0, "positive"},
		{"tick_size", in.TickSize, in.TickSize >= 0, "non-negative"},
		{"slippage_ticks", in.SlippageTicks, in.SlippageTicks >= 0, "non-negative"},
		{"commission", in.Commission, in.Commission >= 0, "non-negative"},
		{"slippage_bps", in.SlippageBps, in.SlippageBps >= 0, "non-negative"},
		{"commission_bps", in.CommissionBps, in.CommissionBps >= 0, "non-negative"},
		{"margin_floor", in.MarginFloor, in.MarginFloor >= 0 && in.MarginFloor < 1, "in [0, 1)"},
	} {
		if !c.ok || math.IsInf(c.v, 0) {
			return nil, fmt.Errorf("dataset %q: instrument %s = %g: must be finite and %s", name, c.field, c.v, c.want)
		}
	}
	if in.MaxContracts < 1 {
		return nil, fmt.Errorf("dataset %q: instrument max_contracts = %d: must be at least 1", name, in.MaxContracts)
	}
	fields := [...]string{"open", "high", "low", "close", "ATR"}
	for t := r.From; t < r.To; t++ {
		if ds.Slip != nil && (!(ds.Slip[t] >= 0) || math.IsInf(ds.Slip[t], 0)) {
			return nil, fmt.Errorf("dataset %q: bar %d: per-bar slippage (Dataset.Slip, half the bid/ask spread) is %g, must be finite and non-negative", name, t, ds.Slip[t])
		}
		for i, v := range [len(fields)]float64{b.Open[t], b.High[t], b.Low[t], b.Close[t], ds.ATR[t]} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("dataset %q: bar %d: %s is %g", name, t, fields[i], v)
			}
		}
		if ds.ATR[t] < 0 {
			return nil, fmt.Errorf("dataset %q: bar %d: ATR is %g, must not be negative", name, t, ds.ATR[t])
		}
	}
	s := &engine{ds: ds, in: in}
	for k := range s.size {
		s.size[k] = sizeContracts(k, in.MaxContracts)
	}
	return s, nil
}

// atr is the ATR of bar t with its floor:
// max(ATR[t], TickSize, 1e-6·|close_t|, 1e-12).
func (s *engine) atr(t int) float64 {
	return max(s.ds.ATR[t], s.in.TickSize, 1e-6*math.Abs(s.ds.Bars.Close[t]), 1e-12)
}

// rewardScale is ATR_t × PointValue × MaxContracts, the money a full
// position makes on a one-ATR move.
func (s *engine) rewardScale(t int) float64 {
	return s.atr(t) * s.in.PointValue * float64(s.in.MaxContracts)
}

// contracts is the size of action size k: max(1, round((k+1)/4 × MaxContracts)).
func (s *engine) contracts(k int) int {
	if uint(k) < market.NumSizes {
		return s.size[k]
	}
	return sizeContracts(k, s.in.MaxContracts) // an invalid action's, before it is refused
}

// sizeContracts is contracts(k) for an instrument of maxContracts.
func sizeContracts(k, maxContracts int) int {
	return max(1, int(math.Round(float64(k+1)/market.NumSizes*float64(maxContracts))))
}

// target is the signed position an action asks for.
func (s *engine) target(a market.Action) int {
	switch a.Dir {
	case 0:
		return -s.contracts(a.Size)
	case 2:
		return s.contracts(a.Size)
	}
	return 0
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

func abs(x int) int { return max(x, -x) }

// stopPrice is ref − k·atr for a long (dir +1) and ref + k·atr for a short.
func stopPrice(ref float64, dir, k int, atr float64) float64 {
	if k == 0 {
		return 0
	}
	return ref - float64(dir*k)*atr
}

// step plays the decision a taken at bar t (already validated) through bar
// t+1: the fill at its open, a stop inside it and the mark to its close. It
// updates acc, appends the fills to *rec unless rec is nil, and returns the
// change of equity in money (see VecEnv for the formula).
func (s *engine) step(acc *account, a market.Action, t int, rec *[]fill) float64 {
	b := s.ds.Bars
	o := b.Open[t+1]
	pv := s.in.PointValue
	slip := s.slipAt(t+1, o)
	// The old position over the gap from close_t to open_{t+1}.
	dE := float64(acc.pos) * (o - b.Close[t]) * pv
	q := s.target(a)
	atr := s.atr(t)
	if d := q - acc.pos; d != 0 {
		price := o + float64(sign(d))*slip
		cost := s.fillCost(d, t+1, o)
		dE -= cost
		record(rec, fill{bar: t + 1, qty: d, price: price, comm: float64(abs(d)) * s.in.Comm(o), cost: cost})
		switch {
		case q == 0:
			*acc = account{}
		case acc.pos == 0 || sign(q) != sign(acc.pos): // open or reverse
			acc.entry, acc.held = price, 0
		case abs(q) > abs(acc.pos): // add: average the entry
			acc.entry = (float64(abs(acc.pos))*acc.entry + float64(abs(d))*price) / float64(abs(q))
		}
		if q != 0 {
			acc.pos, acc.exit = q, a.Exit
			acc.stop = stopPrice(price, sign(q), a.Exit, atr)
		}
	} else if q != 0 && a.Exit != acc.exit {
		acc.exit = a.Exit
		acc.stop = stopPrice(b.Close[t], sign(q), a.Exit, atr)
	}
	if acc.pos != 0 && acc.exit > 0 {
		var x float64
		hit := false
		if acc.pos > 0 && b.Low[t+1] <= acc.stop {
			x, hit = min(o, acc.stop)-slip, true
		} else if acc.pos < 0 && b.High[t+1] >= acc.stop {
			x, hit = max(o, acc.stop)+slip, true
		}
		if hit {
			comm := float64(abs(acc.pos)) * s.in.Comm(o)
			dE += float64(acc.pos)*(x-o)*pv - comm
			record(rec, fill{bar: t + 1, qty: -acc.pos, price: x, comm: comm, cost: s.fillCost(acc.pos, t+1, o)})
			*acc = account{}
		}
	}
	if acc.pos != 0 {
		dE += float64(acc.pos) * (b.Close[t+1] - o) * pv
		acc.held++
	}
	return dE
}

func record(rec *[]fill, f fill) {
	if rec != nil {
		*rec = append(*rec, f)
	}
}

// liquidate closes the open position at the close c of bar t, at
// c − slip for a long and c + slip for a short, with commission, slip
// being slipAt(t, c) (the bar's own half-spread, measured at its open,
// where the dataset has per-bar slippage); it returns the change of
// equity, −|p|·(slip·PV + comm(c)), and records
// the fill in *rec unless rec is nil.
func (s *engine) liquidate(acc *account, t int, rec *[]fill) float64 {
	if acc.pos == 0 {
		return 0
	}
	p := acc.pos
	c := s.ds.Bars.Close[t]
	cost := s.fillCost(p, t, c)
	record(rec, fill{bar: t, qty: -p, price: c - float64(sign(p))*s.slipAt(t, c), comm: float64(abs(p)) * s.in.Comm(c), cost: cost})
	*acc = account{}
	return -cost
}

// observe writes the observation of acc at bar t into dst (ObsDim values):
// Dataset.Obs lays out the bar's features, agent fills in the rest.
func (s *engine) observe(acc *account, t int, dst []float32) {
	s.ds.Obs(t, nil, dst)
	s.agent(acc, t, dst[market.NumFeatures:market.ObsDim])
}

// agent writes the NumAgentFeatures features of acc at bar t into dst (see
// VecEnv for the list).
func (s *engine) agent(acc *account, t int, dst []float32) {
	dst = dst[:market.NumAgentFeatures]
	clear(dst)
	if acc.pos == 0 {
		return
	}
	m := float64(s.in.MaxContracts)
	dir := float64(sign(acc.pos))
	atr := s.atr(t)
	c := s.ds.Bars.Close[t]
	dst[0] = float32(float64(acc.pos) / m)
	dst[1] = float32(float64(abs(acc.pos)) / m)
	if acc.pos > 0 {
		dst[2] = 1
	} else {
		dst[3] = 1
	}
	dst[agentUnrealised] = float32(clip(dir*(c-acc.entry)/atr, clipATR))
	dst[5] = float32(min(float64(acc.held)/HeldScale, 1))
	if acc.exit > 0 {
		dst[6] = float32(clip(dir*(c-acc.stop)/atr, clipATR))
	}
	dst[7] = float32(acc.exit) / 2
}

// agentUnrealised is the index of the unrealised P&L among the agent
// features (VecEnv's list).
const agentUnrealised = 4

func clip(x, lim float64) float64 { return max(-lim, min(lim, x)) }
