package report

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/dqnflow/dqnflow/market/sim"
)

// Section is one series of an evaluation: its test report and plots, and
// with several seeds one row per seed's run.
type Section struct {
	Title    string // e.g. "bundled:USA500IDXUSD_H1.csv"
	Note     string // how the policy was obtained (run, checkpoint, best epoch)
	Report   sim.Report
	Equity   string // PNG file names, relative to the page
	Drawdown string
	Seeds    []SeedRow    // the same config trained at several seeds; empty for one
	Ensemble *EnsembleRow // the seeds' checkpoints voting together, with Seeds
}

// EnsembleRow is the seeds' chosen checkpoints deciding by majority
// (policy.Ensemble): its validation backtest and t-statistic, whether that
// evidence falls short of backtest.min_valid_t (then the run's answer on
// the test range is flat's), the test report it is judged by and its own.
type EnsembleRow struct {
	Members   int        `json:"members"`
	Valid     sim.Report `json:"validation"`
	ValidT    float64    `json:"validation_sharpe_t"`
	Abstained bool       `json:"abstained"`
	Test      sim.Report `json:"test"`
	Own       sim.Report `json:"ensemble_test"`
}

// SeedRow is one seed's training run of a series: the checkpoint validation
// picked, whether the run abstained (ADR 0016), the run's test report (flat's
// when it abstained) and the checkpoint's own test report.
type SeedRow struct {
	Seed        uint64     `json:"seed"`
	BestEpoch   int        `json:"best_epoch"`
	Epochs      int        `json:"epochs"`
	ValidSharpe float64    `json:"validation_sharpe"`
	ValidT      float64    `json:"validation_sharpe_t"`
	Abstained   bool       `json:"abstained"`
	Test        sim.Report `json:"test"`
	Checkpoint  sim.Report `json:"checkpoint_test"`
}

// SeedSummary is what a series' seeds say together: how many runs
// abstained, how many chosen checkpoints beat zero and buy-and-hold's
// Sharpe on the test range, and the mean and sample standard deviation of
// their test Sharpes.
type SeedSummary struct {
	Runs         int     `json:"runs"`
	Abstained    int     `json:"abstained"`
	AboveZero    int     `json:"above_zero"`
	AboveBuyHold int     `json:"above_buy_and_hold"`
	Mean         float64 `json:"mean_sharpe"`
	SD           float64 `json:"sd_sharpe"`
}

// Summarize returns the summary of rows.
func Summarize(rows []SeedRow) SeedSummary {
	var s SeedSummary
	s.Runs = len(rows)
	for _, r := range rows {
		c := r.Checkpoint
		if r.Abstained {
			s.Abstained++
		}
		if c.Sharpe > 0 {
			s.AboveZero++
		}
		if c.Sharpe > c.BuyAndHold.Sharpe {
			s.AboveBuyHold++
		}
		s.Mean += c.Sharpe
	}
	if s.Runs == 0 {
		return s
	}
	s.Mean /= float64(s.Runs)
	if s.Runs > 1 {
		for _, r := range rows {
			d := r.Checkpoint.Sharpe - s.Mean
			s.SD += d * d
		}
		s.SD = math.Sqrt(s.SD / float64(s.Runs-1))
	}
	return s
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
			m    sim.Metrics
		}{{"agent", r.Metrics}, {"buy & hold", r.BuyAndHold}} {
			if x.m.RuinBar > 0 {
				p("\n**%s ruined** at bar %d (%s): equity reached the margin floor and trading stopped; shortfall %.2f.\n",
					x.name, x.m.RuinBar, x.m.RuinTime.Format("2006-01-02 15:04"), x.m.RuinShortfall)
			}
		}
		p("\n![equity](%s)\n\n![drawdown](%s)\n", s.Equity, s.Drawdown)
		if len(s.Seeds) > 1 {
			p("\n### The same config at %d seeds\n\n", len(s.Seeds))
			p("The table and plots above are seed %d's. Each row is a run of its own; \"run's test Sharpe\" is what the run reports (flat's 0 when it abstained), \"checkpoint's\" the test backtest of the checkpoint validation picked.\n\n", s.Seeds[0].Seed)
			p("| seed | best / ran | validation Sharpe (t) | abstained | run's test Sharpe | checkpoint's test Sharpe | its max drawdown | trades |\n|---:|---|---|---|---:|---:|---:|---:|\n")
			for _, r := range s.Seeds {
				ab := "no"
				if r.Abstained {
					ab = "yes"
				}
				p("| %d | %d / %d | %.3f (%.2f) | %s | %.3f | %.3f | %.2f%% | %d |\n", r.Seed, r.BestEpoch, r.Epochs, r.ValidSharpe, r.ValidT, ab,
					r.Test.Sharpe, r.Checkpoint.Sharpe, 100*r.Checkpoint.MaxDrawdown, r.Checkpoint.Trades)
			}
			sum := Summarize(s.Seeds)
			p("\n%d of %d runs abstained. The chosen checkpoints' test Sharpe is above zero in %d of %d and above buy-and-hold's (%.3f) in %d; mean %.3f, standard deviation %.3f.\n",
				sum.Abstained, sum.Runs, sum.AboveZero, sum.Runs, s.Report.BuyAndHold.Sharpe, sum.AboveBuyHold, sum.Mean, sum.SD)
			if en := s.Ensemble; en != nil {
				verdict := "it shows that evidence, so its test backtest is the answer"
				if en.Abstained {
					verdict = "that is short of backtest.min_valid_t, so the answer on the test range is flat's"
				}
				p("\nThe %d checkpoints voting together (a position only where more than half take it): validation Sharpe %.3f (t = %.2f); %s. Its own test backtest: Sharpe %.3f, max drawdown %.2f%%, %d trades, exposure %.1f%%.\n",
					en.Members, en.Valid.Sharpe, en.ValidT, verdict, en.Own.Sharpe, 100*en.Own.MaxDrawdown, en.Own.Trades, 100*en.Own.Exposure)
			}
		}
	}
	return err
}

// Row is one line of the metrics table.
type Row struct {
	Name   string
	Format func(sim.Metrics) string
}

// Rows lists the table's metrics in order.
func Rows() []Row {
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	num := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	money := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	return []Row{
		{"total return", func(m sim.Metrics) string { return pct(m.TotalReturn) }},
		{"annual return", func(m sim.Metrics) string { return pct(m.AnnualReturn) }},
		{"volatility", func(m sim.Metrics) string { return pct(m.Volatility) }},
		{"Sharpe", func(m sim.Metrics) string { return num(m.Sharpe) }},
		{"Sortino", func(m sim.Metrics) string { return num(m.Sortino) }},
		{"max drawdown", func(m sim.Metrics) string { return pct(m.MaxDrawdown) }},
		{"Calmar", func(m sim.Metrics) string { return num(m.Calmar) }},
		{"CVaR 5%", func(m sim.Metrics) string { return pct(m.CVaR5) }},
		{"trades", func(m sim.Metrics) string { return strconv.Itoa(m.Trades) }},
		{"win rate", func(m sim.Metrics) string { return pct(m.WinRate) }},
		{"profit factor", func(m sim.Metrics) string { return num(m.ProfitFactor) }},
		{"turnover", func(m sim.Metrics) string { return num(m.Turnover) }},
		{"exposure", func(m sim.Metrics) string { return pct(m.Exposure) }},
		{"costs", func(m sim.Metrics) string { return money(m.Costs) }},
		{"cost per trade", func(m sim.Metrics) string { return money(m.CostPerTrade) }},
		{"final equity", func(m sim.Metrics) string { return money(m.FinalEquity) }},
	}
}

func orCustom(s string) string {
	if s == "" {
		return "custom"
	}
	return s
}
