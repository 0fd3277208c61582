package localrun

import (
	"fmt"
	"io"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/report"
)

// PrintResult writes the chosen checkpoint of r and its final report.
func PrintResult(w io.Writer, r Result) {
	defer printSeriesResults(w, r.Series)
	stop := ""
	if r.EarlyStop {
		stop = ", stopped early"
	}
	fmt.Fprintf(w, "best epoch %d of %d%s (validation Sharpe %.3f, t = %.2f): %s\n", r.BestEpoch, r.Epochs, stop, r.Valid.Sharpe, r.ValidT, r.Checkpoint)
	if r.Abstained {
		fmt.Fprintln(w, "no edge: t is below backtest.min_valid_t, so the run recommends flat (ADR 0016)")
	}
	if r.Test == nil {
		fmt.Fprintln(w, "no test range (data.test_fraction 0): the validation range below also picked the checkpoint, so it flatters it")
		report.PrintBacktest(w, r.Valid)
		return
	}
	if r.Abstained {
		fmt.Fprintln(w, "test range (held out; touched only by this report), the checkpoint the run does not recommend:")
		report.PrintBacktest(w, *r.CheckpointTest)
		return
	}
	fmt.Fprintln(w, "test range (held out; touched only by this report):")
	report.PrintBacktest(w, *r.Test)
	printSeriesResults(w, r.Series)
}

// printSeriesResults writes a panel run's chosen checkpoint on each series.
func printSeriesResults(w io.Writer, rows []SeriesResult) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "the panel's %d series (above: their equal-risk portfolio, daily returns):\n", len(rows))
	for _, s := range rows {
		line := fmt.Sprintf("  %-16s validation Sharpe %7.3f", s.Name, s.Valid.Sharpe)
		if t := s.Test; t != nil {
			line += fmt.Sprintf(", test Sharpe %7.3f, return %7.2f%%, max drawdown %6.2f%%, trades %d", t.Sharpe, 100*t.TotalReturn, 100*t.MaxDrawdown, t.Trades)
		}
		fmt.Fprintln(w, line)
	}
}

// barSpan is "first .. last" bar time of r, or "-" when r is empty.
func barSpan(ds *market.Dataset, r market.Range) string {
	if r.Len() <= 0 {
		return "-"
	}
	return day(ds, r.From) + " .. " + day(ds, r.To-1)
}

func day(ds *market.Dataset, i int) string {
	if i < 0 || i >= ds.Bars.Len() {
		return "-"
	}
	return ds.Bars.Time[i].Format("2006-01-02 15:04")
}

// DescribeInstrument says how ds prices trades: the instrument, its tick
// and costs. What a round trip costs in basis points depends on the price
// it is measured at, so report.PrintBacktest says it once, for the
// backtest's range.
func DescribeInstrument(ds *market.Dataset) string {
	in := ds.Instrument
	name := in.Name
	if name == "" {
		name = config.InstrumentCustom
	}
	slip := fmt.Sprintf("slippage %g ticks + %g bps", in.SlippageTicks, in.SlippageBps)
	if ds.Slip != nil {
		slip = "slippage half the bid/ask spread of each bar"
	}
	size := fmt.Sprintf("point value %.4g, fixed", in.PointValue)
	if in.Sizing != "" {
		size = fmt.Sprintf("sizing %s: a full position is %.4g× the capital at each range's first fill", in.Sizing, in.Leverage)
	}
	return fmt.Sprintf("%s (tick %g, %s, commission %.4g/contract + %g bps, %s)",
		name, in.TickSize, slip, in.Commission, in.CommissionBps, size)
}
