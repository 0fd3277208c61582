package market

import (
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

// MaxLeverage caps a full position's notional under env.sizing
// "vol_target" at 5 × the capital, so that a series that barely moved on
// its training range (or a flat one, σ = 0) is not levered without bound.
// It is a choice, not a venue's rule: it leaves a 10 % target reachable on
// the quietest corpus pairs (about 5–7 % a year) and stays well inside
// the 20:1–30:1 that retail FX and index CFDs may be margined at.
const MaxLeverage = 5.0

// This file is the one place that decides how big a position is. Every
// command and every benchmark gets its size from here:
//
//   - Sizing gives the leverage L of a full position (MaxContracts
//     contracts): 1 under env.sizing "notional" (the default), and
//     min(env.target_vol / σ, MaxLeverage) under "vol_target", σ being
//     the annualised volatility of the close-to-close returns of the
//     training range only (σ_bar · √BarsPerYear).
//   - ResolveInstrument sizes the training environment's contract at the
//     last training close; TradedInstrument sizes a backtest's contract at
//     the price of the range's first fill (the open of its second bar):
//     PointValue = L · InitialCapital / (MaxContracts · price), so a full
//     position is worth L × the capital when it can first be entered.
//     The agent, the rules and flat trade that contract.
//   - Buy-and-hold holds MaxContracts of the same contract sized at L = 1
//     (BuyAndHoldInstrument): 1× the capital at its first fill, whatever
//     the agent's leverage.
//
// env.point_value > 0 fixes the contract instead (Instrument.Sizing ""):
// nothing is resized, and buy-and-hold holds a full position of it.

// sizingRule is env.sizing with its default.
func sizingRule(e config.EnvConfig) string {
	if e.Sizing == "" {
		return config.SizingNotional
	}
	return e.Sizing
}

// Sizing is the leverage of a full position for env e, estimated on bars
// est of b (the training range: nothing after it) annualised with
// barsPerYear (see the file's comment).
func Sizing(e config.EnvConfig, b *prices.Bars, est Range, barsPerYear float64) (float64, error) {
	switch rule := sizingRule(e); rule {
	case config.SizingNotional:
		return 1, nil
	case config.SizingVolTarget:
		tv := e.TargetVol
		if tv == 0 {
			tv = config.DefaultTargetVol
		}
		sigma, n := closeVolatility(b, est)
		if n < 2 || !(barsPerYear > 0) {
			return 0, &config.FieldError{Field: "env.sizing", Value: rule, Allowed: fmt.Sprintf(
				"vol_target estimates the volatility on the training range %s of %s, which holds %d returns (need at least 2) at %g bars a year",
				est, b.Name, n, barsPerYear)}
		}
		ann := sigma * math.Sqrt(barsPerYear)
		if !(ann > 0) {
			return MaxLeverage, nil
		}
		return min(tv/ann, MaxLeverage), nil
	default:
		return 0, &config.FieldError{Field: "env.sizing", Value: rule, Allowed: `must be "notional" or "vol_target"`}
	}
}

// SizingFor is Sizing for a run of cfg on bars b that were not prepared
// with it (a checkpoint backtested on another file): the estimation range
// is the training range of cfg's split of b, as Prepare would take it, or
// every bar after the warmup (the causal burn-in included) when that
// split does not fit b.
func SizingFor(cfg config.RunConfig, b *prices.Bars) (float64, error) {
	if sizingRule(cfg.Env) == config.SizingNotional {
		return 1, nil
	}
	est := Range{From: min(FeatureWarmup+unfitted(cfg.Data).BurnIn, b.Len()), To: b.Len()}
	if train, _, _, err := split(b, FeatureWarmup, cfg); err == nil {
		est = train
	}
	return Sizing(cfg.Env, b, est, b.BarsPerYear())
}

// closeVolatility is the sample standard deviation of the simple returns
// close_t / close_{t−1} − 1 for t in (r.From, r.To) (pairs with a
// non-positive or non-finite close skipped) and how many returns it saw.
func closeVolatility(b *prices.Bars, r Range) (float64, int) {
	var n int
	var mean, m2 float64
	for t := max(r.From+1, 1); t < min(r.To, b.Len()); t++ {
		p, c := b.Close[t-1], b.Close[t]
		if !(p > 0) || math.IsInf(p, 0) || math.IsNaN(c) || math.IsInf(c, 0) {
			continue
		}
		x := c/p - 1
		n++
		d := x - mean
		mean += d / float64(n)
		m2 += d * (x - mean)
	}
	if n < 2 {
		return 0, n
	}
	return math.Sqrt(m2 / float64(n-1)), n
}

// sizedPointValue is the point value that makes a full position worth
// Leverage × InitialCapital at price ref:
// InitialCapital / (MaxContracts · ref), times Leverage when it is not 1
// (so the notional rule's bits are those of the rule before sizing).
func (i Instrument) sizedPointValue(ref float64) float64 {
	pv := i.InitialCapital / (float64(i.MaxContracts) * ref)
	if i.Leverage != 1 {
		pv *= i.Leverage
	}
	return pv
}

// SizedAt is the instrument with its contract sized at price ref
// (sizedPointValue): the point value, a per-contract commission that
// follows it (CommissionPoints) and a "bps" instrument's tick (one basis
// point of ref). An instrument of fixed point value (Sizing "") is
// returned as it is.
func (i Instrument) SizedAt(ref float64) (Instrument, error) {
	if i.Sizing == "" {
		return i, nil
	}
	if !(ref > 0) || math.IsInf(ref, 0) {
		return i, fmt.Errorf("size instrument %s at price %g: sizing %s needs a positive, finite price; set env.point_value to trade a fixed contract", orName(i.Name), ref, i.Sizing)
	}
	i.PointValue = i.sizedPointValue(ref)
	if i.CommissionPoints > 0 {
		i.Commission = i.CommissionPoints * i.PointValue
	}
	if i.Name == config.InstrumentBps {
		i.TickSize = 1e-4 * ref
	}
	return i, nil
}

// TradedInstrument is the instrument a backtest over bars r of ds trades:
// ds.Instrument sized at the price of the range's first fill, the open of
// bar r.From+1 (the file's comment). Every backtest (sim.Backtest, the
// batched and the device ones) and every benchmark but buy-and-hold
// trades it, so their figures on the same bars agree whichever command
// asks.
func TradedInstrument(ds *Dataset, r Range) (Instrument, error) {
	if r.From < 0 || r.From+1 >= ds.Bars.Len() {
		return ds.Instrument, fmt.Errorf("size the range %s: it needs a bar after its first inside [0, %d)", r, ds.Bars.Len())
	}
	in, err := ds.Instrument.SizedAt(ds.Bars.Open[r.From+1])
	if err != nil {
		return in, fmt.Errorf("range %s, first fill at the open of bar %d: %w", r, r.From+1, err)
	}
	return in, nil
}

// BuyAndHoldInstrument is the contract buy-and-hold holds MaxContracts of
// over bars r of ds: TradedInstrument at leverage 1, so that it holds 1×
// the capital at its first fill.
func BuyAndHoldInstrument(ds *Dataset, r Range) (Instrument, error) {
	if ds.Instrument.Sizing == "" {
		return TradedInstrument(ds, r)
	}
	one := *ds
	one.Instrument.Leverage = 1
	return TradedInstrument(&one, r)
}

// LegacySizing is the instrument of a checkpoint written before sizing
// existed (an auto point value, no Sizing) read under the notional rule, so
// that its backtests size the contract as every other command's do, with
// a preset's commission following the contract (CommissionPoints).
func LegacySizing(inst Instrument) Instrument {
	inst.Sizing, inst.Leverage = config.SizingNotional, 1
	if p, ok := Presets[inst.Name]; ok && inst.CommissionPoints == 0 {
		inst.CommissionPoints = p.CommissionUSD / p.PointValueUSD
	}
	return inst
}

// SameContract reports whether the instrument stored in a checkpoint is
// the one prepared now for its run: equal, or equal once a checkpoint
// written before sizing existed is read as LegacySizing says (a run
// resumes across the change; its point value and costs are the same
// numbers).
func SameContract(stored, prepared Instrument) bool {
	if stored == prepared {
		return true
	}
	return stored.Sizing == "" && prepared.Sizing == config.SizingNotional && LegacySizing(stored) == prepared
}

func orName(s string) string {
	if s == "" {
		return config.InstrumentCustom
	}
	return s
}
