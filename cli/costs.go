package cli

import (
	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/config"
)

// costFlags are the instrument flags of the commands that price trades on
// a file (backtest, predict): each overrides the env key of the same name.
type costFlags struct {
	fs                           *pflag.FlagSet
	instrument                   *string
	tick, slipTicks, slipBps     *float64
	commission, commBps, pv, flo *float64
}

func addCostFlags(fs *pflag.FlagSet) *costFlags {
	c := &costFlags{
		fs:         fs,
		instrument: fs.String("instrument", "", "auto, ES, NQ, CL, BRN, BTC, bps, custom, table (the file's row of the instrument table) or a table symbol such as EURUSD (default: the file's documented instrument; the checkpoint's own on its training data)"),
		tick:       fs.Float64("tick-size", 0, "tick size in price units (instrument custom)"),
		slipTicks:  fs.Float64("slippage-ticks", 0, "slippage per fill in ticks (presets and custom)"),
		slipBps:    fs.Float64("slippage-bps", 0, "slippage per fill in basis points (instrument bps)"),
		commission: fs.Float64("commission", 0, "commission per contract per fill in money (instrument custom)"),
		commBps:    fs.Float64("commission-bps", 0, "commission per fill in basis points (instrument bps)"),
		pv:         fs.Float64("point-value", 0, "money per price point per contract (0: a full position is worth the capital)"),
		flo:        fs.Float64("margin-floor", 0, "stop trading when equity falls to this fraction of the capital"),
	}
	flagValues(fs, "instrument", append(append([]string{config.InstrumentAuto, config.InstrumentBps, config.InstrumentCustom, config.InstrumentTable}, config.InstrumentPresets...), config.InstrumentSymbols...)...)
	groupFlags(fs, "Instrument and cost", "instrument", "tick-size", "slippage-ticks", "slippage-bps", "commission", "commission-bps", "point-value", "margin-floor")
	return c
}

// edit returns the overrides the command line set, or nil when it set
// none; a cost flag without --instrument prices the file as custom
// (tick flags) or bps (bps flags), so that the number given is the one
// used.
func (c *costFlags) edit() func(*config.EnvConfig) {
	set := map[string]bool{}
	c.fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	values := map[string]*float64{
		"tick-size": c.tick, "slippage-ticks": c.slipTicks, "slippage-bps": c.slipBps,
		"commission": c.commission, "commission-bps": c.commBps, "point-value": c.pv, "margin-floor": c.flo,
	}
	given := set["instrument"]
	for name := range values {
		given = given || set[name]
	}
	if !given {
		return nil
	}
	return func(e *config.EnvConfig) {
		switch {
		case set["instrument"]:
			e.Instrument = *c.instrument
		case set["slippage-bps"] || set["commission-bps"]:
			e.Instrument = config.InstrumentBps
		case set["tick-size"] || set["commission"]:
			e.Instrument = config.InstrumentCustom
		}
		fields := map[string]*float64{
			"tick-size": &e.TickSize, "slippage-ticks": &e.SlippageTicks, "slippage-bps": &e.SlippageBps,
			"commission": &e.Commission, "commission-bps": &e.CommissionBps, "point-value": &e.PointValue, "margin-floor": &e.MarginFloor,
		}
		for name, v := range values {
			if set[name] {
				*fields[name] = *v
			}
		}
	}
}
