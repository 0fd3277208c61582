package report

import (
	"fmt"
	"io"

	"github.com/dqnflow/dqnflow/market/sim"
)

// PrintBacktest writes r as text, the agent beside buy-and-hold and flat
// (the rows of Rows), with what a round trip costs, the sizing and any
// ruin: what the commands print for a backtest.
func PrintBacktest(w io.Writer, r sim.Report) {
	fmt.Fprintf(w, "backtest %s .. %s (%d bars, %.0f bars/year)\n", r.From.Format("2006-01-02 15:04"), r.To.Format("2006-01-02 15:04"), r.Bars, r.BarsPerYear)
	fmt.Fprintf(w, "%-16s %12s %12s %12s\n", "", "agent", "buy & hold", "flat")
	for _, row := range Rows() {
		fmt.Fprintf(w, "%-16s %12s %12s %12s\n", row.Name, row.Format(r.Metrics), row.Format(r.BuyAndHold), row.Format(r.Flat))
	}
	name := r.Instrument.Name
	if name == "" {
		name = "custom"
	}
	fmt.Fprintf(w, "cost per round trip: %.2f bps of one contract's notional at this range's mean close (%s)\n", r.CostPerRoundTripBps, name)
	if in := r.Instrument; in.Sizing != "" {
		fmt.Fprintf(w, "sizing %s: a full position (%d contracts of point value %.4g) is %.4g× the capital at the first fill; buy & hold holds 1×\n",
			in.Sizing, in.MaxContracts, in.PointValue, in.Leverage)
	}
	for _, x := range []struct {
		name string
		m    sim.Metrics
	}{{"agent", r.Metrics}, {"buy & hold", r.BuyAndHold}} {
		if x.m.RuinBar > 0 {
			fmt.Fprintf(w, "%s: RUINED at bar %d (%s): equity reached the margin floor, trading stopped; shortfall %.2f\n",
				x.name, x.m.RuinBar, x.m.RuinTime.Format("2006-01-02 15:04"), x.m.RuinShortfall)
		}
	}
}
