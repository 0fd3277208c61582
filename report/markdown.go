package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/dqnflow/dqnflow/market"
)

// Section is one series of an evaluation: its test report and plots.
type Section struct {
	Title    string // e.g. "bundled:USA500IDXUSD_H1.csv"
	Note     string // how the policy was obtained (run, checkpoint, best epoch)
	Report   market.Report
	Equity   string // PNG file names, relative to the page
	Drawdown string
}

// WriteMarkdown writes the evaluation page: for each section the test
// range, the metrics of the agent beside buy-and-hold and flat, costs per
// trade and per round trip, ruin if any, and the two plots.
func WriteMarkdown(w io.Writer, title, intro string, sections []Section) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	p("# %s\n\n%s\n", title, intro)
	for _, s := range sections {
		r := s.Report
		p("\n## %s\n\n%s\n\n", s.Title, s.Note)
		p("Test range %s .. %s, %d bars (%.0f bars/year). Instrument %s: %.2f bps per round trip at the mean close.\n\n",
			r.From.Format("2006-01-02 15:04"), r.To.Format("2006-01-02 15:04"), r.Bars, r.BarsPerYear, orCustom(r.Instrument.Name), r.CostPerRoundTripBps)
		p("| metric | agent | buy & hold | flat |\n|---|---:|---:|---:|\n")
		for _, row := range Rows() {
			p("| %s | %s | %s | %s |\n", row.Name, row.Format(r.Metrics), row.Format(r.BuyAndHold), row.Format(r.Flat))
		}
		for _, x := range []struct {
			name string
			m    market.Metrics
		}{{"agent", r.Metrics}, {"buy & hold", r.BuyAndHold}} {
			if x.m.RuinBar > 0 {
				p("\n**%s ruined** at bar %d (%s): equity reached the margin floor and trading stopped; shortfall %.2f.\n",
					x.name, x.m.RuinBar, x.m.RuinTime.Format("2006-01-02 15:04"), x.m.RuinShortfall)
			}
		}
		p("\n![equity](%s)\n\n![drawdown](%s)\n", s.Equity, s.Drawdown)
	}
	return err
}

// Row is one line of the metrics table.
type Row struct {
	Name   string
	Format func(market.Metrics) string
}

// Rows lists the table's metrics in order.
func Rows() []Row {
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	num := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	money := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	return []Row{
		{"total return", func(m market.Metrics) string { return pct(m.TotalReturn) }},
		{"annual return", func(m market.Metrics) string { return pct(m.AnnualReturn) }},
		{"volatility", func(m market.Metrics) string { return pct(m.Volatility) }},
		{"Sharpe", func(m market.Metrics) string { return num(m.Sharpe) }},
		{"Sortino", func(m market.Metrics) string { return num(m.Sortino) }},
		{"max drawdown", func(m market.Metrics) string { return pct(m.MaxDrawdown) }},
		{"Calmar", func(m market.Metrics) string { return num(m.Calmar) }},
		{"CVaR 5%", func(m market.Metrics) string { return pct(m.CVaR5) }},
		{"trades", func(m market.Metrics) string { return strconv.Itoa(m.Trades) }},
		{"win rate", func(m market.Metrics) string { return pct(m.WinRate) }},
		{"profit factor", func(m market.Metrics) string { return num(m.ProfitFactor) }},
		{"turnover", func(m market.Metrics) string { return num(m.Turnover) }},
		{"exposure", func(m market.Metrics) string { return pct(m.Exposure) }},
		{"costs", func(m market.Metrics) string { return money(m.Costs) }},
		{"cost per trade", func(m market.Metrics) string { return money(m.CostPerTrade) }},
		{"final equity", func(m market.Metrics) string { return money(m.FinalEquity) }},
	}
}

func orCustom(s string) string {
	if s == "" {
		return "custom"
	}
	return s
}
