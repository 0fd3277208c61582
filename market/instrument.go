package market

import (
	"fmt"
	"math"
	"strings"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/prices"
)

// Instrument is the traded contract and the account; values are resolved
// (no "auto" zeros) once a Dataset is prepared.
//
// The cost of one fill of one contract at price P, in price points, is
//
//	slip(P) = SlippageTicks·TickSize + SlippageBps·10⁻⁴·P     (the fill moves against the order by slip)
//	comm(P) = Commission/PointValue + CommissionBps·10⁻⁴·P    (paid in money as comm·PointValue)
//
// so presets and custom instruments cost a fixed number of price points
// and "bps" instruments a fixed share of the price, whatever its level.
type Instrument struct {
	// Name is the preset ("ES", …), "bps" or "custom" the costs came from.
	Name           string  `json:"name,omitempty"`
	TickSize       float64 `json:"tick_size"`
	SlippageTicks  float64 `json:"slippage_ticks"`
	Commission     float64 `json:"commission"`  // money per contract per fill
	PointValue     float64 `json:"point_value"` // money per price point per contract
	MaxContracts   int     `json:"max_contracts"`
	InitialCapital float64 `json:"initial_capital"`
	// SlippageBps and CommissionBps are per-fill costs in basis points of
	// the fill price.
	SlippageBps   float64 `json:"slippage_bps,omitempty"`
	CommissionBps float64 `json:"commission_bps,omitempty"`
	// MarginFloor ends a backtest's trading when equity falls to
	// MarginFloor × InitialCapital or below (sim.Backtest).
	MarginFloor float64 `json:"margin_floor,omitempty"`
	// Sizing is the rule that sizes the contract (env.sizing, "notional"
	// or "vol_target"): PointValue follows the price a range is entered
	// at (SizedAt), so that a full position is worth Leverage ×
	// InitialCapital there. "" when env.point_value fixes the contract
	// (and in checkpoints written before sizing existed).
	Sizing string `json:"sizing,omitempty"`
	// Leverage is a full position's notional over InitialCapital at the
	// reference price: 1 under "notional", TargetVol / σ (at most
	// MaxLeverage) under "vol_target" (Sizing).
	Leverage float64 `json:"leverage,omitempty"`
	// CommissionPoints is a preset's or a table future's commission per
	// contract in price points (its money figure over its own point
	// value), so that Commission = CommissionPoints × PointValue follows
	// a resized contract. 0 when Commission is money as given (custom).
	CommissionPoints float64 `json:"commission_points,omitempty"`
}

// Preset is a futures contract's tick size and all-in commission per side.
// Commission is in money per contract at the contract's real point value;
// ResolveInstrument converts it to price points (CommissionUSD /
// PointValueUSD), because a run sizes its own contract (point_value auto).
type Preset struct {
	Name          string  `json:"name"`
	Description   string  `json:"description"`
	TickSize      float64 `json:"tick_size"`       // price units
	PointValueUSD float64 `json:"point_value_usd"` // the exchange's contract multiplier
	CommissionUSD float64 `json:"commission_usd"`  // per contract per side, broker + exchange + clearing
}

// Presets are the contracts env.instrument can name (config.InstrumentPresets):
// the futures rows of the instrument table (Instruments, whose note gives
// the commissions' basis). A preset takes its slippage from
// env.slippage_ticks.
var Presets = presets()

func presets() map[string]Preset {
	out := map[string]Preset{}
	for _, sp := range Instruments {
		if sp.Class == ClassFuture {
			out[sp.Symbol] = Preset{sp.Symbol, sp.Description, sp.TickSize, sp.PointValue, sp.CommissionPerContract}
		}
	}
	return out
}

// BundledInstruments is the documented instrument of each bundled file
// (data/README-*.md), what env.instrument "auto" picks for it. Any other
// file, and the synthetic series, get "bps".
var BundledInstruments = map[string]string{
	data.Prefix + "USA500IDXUSD_H1.csv": "ES",
	data.Prefix + "bitcoin_2024.csv":    "BTC",
}

// AutoInstrument is the instrument env.instrument "auto" means for
// dataPath: the bundled file's documented one, else "bps".
func AutoInstrument(dataPath string) string {
	if name, ok := BundledInstruments[dataPath]; ok {
		return name
	}
	return config.InstrumentBps
}

// ResolveInstrument turns the env config into the Instrument that trades
// dataPath, sized at refPrice with leverage (Sizing). The costs follow
// env.instrument:
//
//	"auto"     the bundled file's documented preset (AutoInstrument), else "bps"
//	preset     ES, NQ, CL, BRN, BTC: the table's tick and commission, slippage
//	           env.slippage_ticks
//	"table"    the instrument table's row of the file's symbol (SymbolOf)
//	SYMBOL     the table's row of that symbol (LookupInstrument), e.g. EURUSD
//	"bps"      env.slippage_bps and env.commission_bps of the price
//	"custom"   env.tick_size, env.slippage_ticks and env.commission as given
//
// A PointValue of 0 (env.point_value, the default) means the contract is
// sized (Sizing, SizedAt): leverage × InitialCapital / (MaxContracts ·
// refPrice), a full position worth leverage × the capital at refPrice
// (Prepare passes the last training bar's close, the training
// environment's reference; a backtest resizes at the first fill of its
// range). For "bps" the TickSize (which only floors the ATR) is one basis
// point of refPrice. refPrice must be positive and finite, leverage
// positive.
func ResolveInstrument(e config.EnvConfig, dataPath string, refPrice, leverage float64) (Instrument, error) {
	if !(refPrice > 0) || math.IsInf(refPrice, 0) {
		return Instrument{}, fmt.Errorf("resolve instrument for %s: reference price %g must be positive and finite", dataPath, refPrice)
	}
	if !(leverage > 0) || math.IsInf(leverage, 0) {
		return Instrument{}, fmt.Errorf("resolve instrument for %s: leverage %g must be positive and finite", dataPath, leverage)
	}
	inst := Instrument{
		PointValue: e.PointValue, MaxContracts: e.MaxContracts, InitialCapital: e.InitialCapital,
		MarginFloor: e.MarginFloor,
	}
	if inst.PointValue == 0 && e.MaxContracts > 0 {
		inst.Sizing, inst.Leverage = sizingRule(e), leverage
		inst.PointValue = inst.sizedPointValue(refPrice)
	}
	name := e.Instrument
	if name == config.InstrumentAuto || name == "" {
		name = AutoInstrument(dataPath)
	}
	inst.Name = name
	switch name {
	case config.InstrumentCustom:
		inst.TickSize, inst.SlippageTicks, inst.Commission = e.TickSize, e.SlippageTicks, e.Commission
	case config.InstrumentBps:
		inst.TickSize = 1e-4 * refPrice
		inst.SlippageBps, inst.CommissionBps = e.SlippageBps, e.CommissionBps
	default:
		if p, ok := Presets[name]; ok {
			inst.TickSize, inst.SlippageTicks = p.TickSize, e.SlippageTicks
			inst.CommissionPoints = p.CommissionUSD / p.PointValueUSD
			inst.Commission = inst.CommissionPoints * inst.PointValue
			break
		}
		symbol := name
		if name == config.InstrumentTable {
			symbol = SymbolOf(dataPath)
		}
		sp, ok := LookupInstrument(symbol)
		if !ok {
			what := fmt.Sprintf("names no row of the instrument table (market.Instruments: %s)", strings.Join(InstrumentSymbols(), " "))
			if name == config.InstrumentTable {
				what = fmt.Sprintf("table: data path %s has symbol %q (market.SymbolOf), which the instrument table (market.Instruments) lacks; name a symbol (e.g. EURUSD) or bps", dataPath, symbol)
			}
			return Instrument{}, &config.FieldError{Field: "env.instrument", Value: name, Allowed: what}
		}
		inst.Name = sp.Symbol
		inst.TickSize, inst.SlippageTicks, inst.SlippageBps, inst.CommissionBps = sp.TickSize, sp.SlippageTicks, sp.SlippageBps, sp.CommissionBps
		if sp.CommissionPerContract > 0 {
			inst.CommissionPoints = sp.CommissionPerContract / sp.PointValue
			inst.Commission = inst.CommissionPoints * inst.PointValue
		}
	}
	return inst, inst.Check()
}

// Slip is the slippage of one fill at price p, in price points.
func (i Instrument) Slip(p float64) float64 {
	return i.SlippageTicks*i.TickSize + i.SlippageBps*1e-4*math.Abs(p)
}

// Comm is the commission of one contract filled at price p, in money.
func (i Instrument) Comm(p float64) float64 {
	return i.Commission + i.CommissionBps*1e-4*math.Abs(p)*i.PointValue
}

// RoundTripBps is the cost of opening and closing one contract at price p
// (two fills, slippage and commission), in basis points of the notional:
// 2·(Slip(p) + Comm(p)/PointValue)/p · 10⁴.
func (i Instrument) RoundTripBps(p float64) float64 {
	if !(p > 0) || !(i.PointValue > 0) {
		return 0
	}
	return 2 * (i.Slip(p) + i.Comm(p)/i.PointValue) / p * 1e4
}

// Check rejects an instrument that cannot price a trade.
func (i Instrument) Check() error {
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(i.TickSize > 0) || !fin(i.TickSize):
		return fmt.Errorf("instrument tick_size %v: must be positive", i.TickSize)
	case !(i.PointValue > 0) || !fin(i.PointValue):
		return fmt.Errorf("instrument point_value %v: must be positive (resolved, not auto)", i.PointValue)
	case i.MaxContracts < 1:
		return fmt.Errorf("instrument max_contracts %d: must be at least 1", i.MaxContracts)
	case !(i.InitialCapital > 0) || !fin(i.InitialCapital):
		return fmt.Errorf("instrument initial_capital %v: must be positive", i.InitialCapital)
	case !(i.SlippageTicks >= 0) || !(i.Commission >= 0) || !fin(i.SlippageTicks) || !fin(i.Commission):
		return fmt.Errorf("instrument slippage_ticks %v, commission %v: must not be negative", i.SlippageTicks, i.Commission)
	case !(i.SlippageBps >= 0) || !(i.CommissionBps >= 0) || !fin(i.SlippageBps) || !fin(i.CommissionBps):
		return fmt.Errorf("instrument slippage_bps %v, commission_bps %v: must not be negative", i.SlippageBps, i.CommissionBps)
	case !(i.MarginFloor >= 0 && i.MarginFloor < 1):
		return fmt.Errorf("instrument margin_floor %v: must be in [0, 1)", i.MarginFloor)
	}
	return nil
}

// SpreadSlip is the per-bar slippage of bars that quote bid and ask
// (Dataset.Slip): half the spread at each bar's open, Spread[t] / 2, the
// distance from the mid (the bars' prices) to the ask a market buy pays
// or the bid a market sell gets. Nil when b has no Spread.
func SpreadSlip(b *prices.Bars) []float64 {
	if b == nil || b.Spread == nil {
		return nil
	}
	out := make([]float64, len(b.Spread))
	for t, x := range b.Spread {
		out[t] = x / 2
	}
	return out
}
